"""The course: the lessons (NN_name.ipynb), their solutions/ and the graded assignments/; installed as flashsim_lessons."""
