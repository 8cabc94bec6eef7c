"""What a run will need before it starts: batch maths, schedule, memory, disk, hours."""
