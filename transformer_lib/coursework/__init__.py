"""For learners and instructors: the exercises' checks (:mod:`.exercises`) and grading notebooks (:mod:`.grading`)."""
