//! The shipped task suite.
