"""Line staging: numbering around blank and undecodable lines, CRLF, a missing final newline."""
from __future__ import annotations

from rolloutlab.ingest import lines


def staged(con, path):
    con.execute("BEGIN")
    lines.stage_lines(con, path)
    got = con.execute(f"SELECT line_no, line FROM {lines.LINES_TABLE} ORDER BY line_no").fetchall()
    bad = con.execute(f"SELECT line_no, reason FROM {lines.STAGED_REJECTS}").fetchall()
    con.execute("ROLLBACK")
    return got, bad


def test_numbers_skip_blank_lines_and_count_rejected_ones(con, tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_bytes(b'{"a":1}\r\n\r\n   \n\xff\xfe\n{"a":2}\n{"a":3}')
    got, bad = staged(con, path)
    assert got == [(1, '{"a":1}'), (5, '{"a":2}'), (6, '{"a":3}')]
    assert [b[0] for b in bad] == [4] and bad[0][1].startswith("invalid UTF-8")


def test_tabs_and_quotes_inside_a_line_stay_one_value(con, tmp_path):
    path = tmp_path / "x.jsonl"
    text = '{"a": "x,y;z", "b":\t"q\\"uote"}\n'
    path.write_text(text)
    got, _ = staged(con, path)
    assert got == [(1, text.rstrip("\n"))]


def test_ends_with_newline(tmp_path):
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    a.write_text("x\n"), b.write_text("x"), c.write_text("")
    assert lines.ends_with_newline(a) and not lines.ends_with_newline(b) and lines.ends_with_newline(c)
