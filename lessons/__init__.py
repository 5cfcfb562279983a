"""The course: the lessons (NN_name.ipynb), their solutions/ and the graded assignments/ (the masters); installed as
flashsim_lessons, with the assignments' student copies in their place (setup.py)."""
