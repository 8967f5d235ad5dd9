"""For learners: the exercises' checks, the quizzes, and the helpers the assignments' tests use.

:mod:`.exercises` checks the lessons' exercises, :mod:`.quiz` shows their quizzes, and :mod:`.checks`
holds what the assignments' tests call.
"""
