"""What one run is: its summary and description, the doctor's notes on what it lacks, the memory it holds, where each step's time goes (breakdown), its steady-state steps (steady), its tf.function calls (calls).
May import common only."""
