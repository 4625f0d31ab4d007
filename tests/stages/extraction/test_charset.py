from stages.extraction.charset import charset_from_content_type, decode_html


def test_declared_charset_wins_when_it_decodes():
    text, codec, source = decode_html("Grüße".encode("cp1252"), [("http", "iso-8859-1")])
    assert (text, codec, source) == ("Grüße", "cp1252", "http")  # latin-1 label decodes as windows-1252


def test_wrong_label_falls_through_to_detection():
    # German text in windows-1252 served as "utf-8": strict UTF-8 fails, detection finds a Latin code page
    german = "Die Straße in Köln ist schön, und die Bürger grüßen freundlich. Übermorgen fährt der Zug. " * 5
    text, codec, source = decode_html(german.encode("cp1252"), [("http", "utf-8")])
    assert text == german and source == "detected"


def test_label_that_decodes_is_trusted_like_a_browser_would():
    # A wrong label whose codec accepts the bytes yields mojibake, exactly as a browser shows it; the
    # language-ID score of such a page is then low and the ledger says so.
    text, codec, source = decode_html("Привет, мир".encode(), [("http", "gb2312")])
    assert (codec, source) == ("gb18030", "http") and text != "Привет, мир"


def test_meta_charset_used_when_no_header():
    data = '<html><head><meta charset="windows-1251"></head><body>Привет</body></html>'.encode("cp1251")
    text, codec, source = decode_html(data, [("http", None)])
    assert "Привет" in text and source == "meta" and codec == "cp1251"


def test_bom_beats_declared():
    data = "\ufeff<p>ünïcode</p>".encode("utf-8")
    text, codec, source = decode_html(data, [("http", "iso-8859-1")])
    assert text == "<p>ünïcode</p>" and source == "bom"


def test_undecodable_bytes_never_raise():
    data = bytes(range(256)) * 10
    text, codec, source = decode_html(data, [("http", "utf-8")])
    assert isinstance(text, str) and len(text) > 0


def test_unknown_label_is_ignored():
    text, codec, source = decode_html(b"<p>plain</p>", [("http", "x-no-such-charset")])
    assert text == "<p>plain</p>" and codec == "utf-8"


def test_charset_parameter_parsing():
    assert charset_from_content_type('text/html; charset="ISO-8859-1"') == "ISO-8859-1"
    assert charset_from_content_type("text/html") is None
    assert charset_from_content_type(None) is None
