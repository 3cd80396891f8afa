"""What one run is: its summary and description, the doctor's notes on what it lacks, the memory it holds.
May import common only."""
