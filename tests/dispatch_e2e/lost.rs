//! Lost workers (issue 43): to come.
