"""Data stages: turn a source dataset into verl's parquet layout plus a manifest (`rlrecipes data`)."""
