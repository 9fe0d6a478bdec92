//! Synthetic WMRL benchmark (being written).
