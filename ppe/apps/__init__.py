"""Real applications that ask PPE for schedules and report how their runs went."""
