//! Placeholder: tests for its own issue.
