"""Reading and writing the lake: the pyiceberg catalog and the Spark session configuration."""
