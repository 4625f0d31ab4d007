"""Getting text out of web pages: WARC reading, charset decoding, trafilatura extraction and its
speedups. The cleaning steps proper are the other modules of `stages/`."""
