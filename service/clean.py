"""Text cleaning for customer-service chat messages.

``clean_text`` turns whatever a chat client sent into one tidy line that the
PII masker and the summariser can rely on:

* emoji, control and invisible format characters are dropped (zero-width
  characters are also a cheap way to split a phone number so that a regex
  misses it);
* full-width ASCII *digits, letters and symbols* become their ASCII form, so
  ``１３８`` typed on a Chinese IME match the same patterns as
  ``138``;
* CJK punctuation is kept as it is: ``，。？！：；（）`` and the other full-width
  punctuation that Chinese text uses as ordinary punctuation stay readable for
  the summariser.  Only ``＋ － ． ／ ＠ ＃ ％ …`` and friends, which have no
  Chinese-specific meaning, are folded to ASCII;
* URLs keep scheme, host and path; query string, fragment and user-info are
  dropped because that is where session tokens, signatures and tracking IDs
  live;
* every run of whitespace (newlines included) becomes a single space, and the
  result is stripped.

The function never raises for any ``str`` (lone surrogates included) and runs
in time linear in the input.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

__all__ = ["clean_text"]

# Full-width forms (U+FF01..U+FF5E) that are ordinary Chinese punctuation.
# Folding these to ASCII would make the text harder to read for people and
# for the summariser, and they carry no information a regex needs.
_KEEP_FULLWIDTH = set("，！？：；（）")


def _build_width_table() -> dict[int, int]:
    table = {
        code: code - 0xFEE0
        for code in range(0xFF01, 0xFF5F)
        if chr(code) not in _KEEP_FULLWIDTH
    }
    table[0x3000] = 0x20  # ideographic space
    table[0xFFE5] = 0xA5  # full-width yen sign -> ¥, as NFKC does
    table[0xFFE0] = 0xA2  # ￠
    table[0xFFE1] = 0xA3  # ￡
    return table


_WIDTH_TABLE = _build_width_table()
# str.translate walks the whole string through a dict; most messages have
# nothing to fold, and one regex scan is much cheaper than that.
_NEEDS_WIDTH = re.compile("[" + "".join(re.escape(chr(c)) for c in sorted(_WIDTH_TABLE)) + "]")

# Characters that are removed outright:
# * lone surrogates (can't be encoded, break json/utf-8 writers downstream);
# * C0/C1 controls that are not whitespace (whitespace is collapsed below);
# * format characters: soft hyphen, zero-width space/joiners, bidi controls,
#   word joiner, BOM, interlinear annotation, tag characters;
# * emoji and pictographs, their variation selectors, skin tones and keycap
#   combiners.
_DROP = re.compile(
    "["
    "\ud800-\udfff"
    "\x00-\x08\x0e-\x1b\x7f-\x84\x86-\x9f"
    "\xad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f"
    "\ufeff\ufff9-\ufffb"
    "\u20e3\u231a\u231b\u23e9-\u23fa\u24c2\u25aa\u25ab\u25b6\u25c0\u25fb-\u25fe"
    "\u2600-\u27bf\u2934\u2935\u2b05-\u2b07\u2b1b\u2b1c\u2b50\u2b55"
    "\u3030\u303d\u3297\u3299\ufe00-\ufe0f"
    "\U0001f000-\U0001faff\U000e0000-\U000e007f"
    "]+"
)

_WHITESPACE = re.compile(r"\s+")

# Stop a URL at whitespace, at CJK punctuation and at quotes/brackets that
# usually enclose it in prose; a Chinese character directly after a URL also
# ends it (people type "链接https://a.cn/x看一下").
_URL = re.compile(
    r"(?i)(?<![A-Za-z0-9.])(?:https?://|www\.)"
    r"[^\s<>\"'`，。！？；：、（）【】《》「」\u3000-\u303f\u4e00-\u9fff]+"
)
_URL_TRAILING = ".,;:!?)]}'\""


def _normalise_url(match: re.Match[str]) -> str:
    raw = match.group(0)
    # Sentence punctuation glued to the end of a URL is not part of it.
    url = raw.rstrip(_URL_TRAILING)
    tail = raw[len(url) :]
    has_scheme = "://" in url[:8]
    try:
        parts = urlsplit(url if has_scheme else "http://" + url)
        # User-info ("user:password@") is a credential, never keep it.
        host = parts.netloc.rpartition("@")[2].lower()
        path = parts.path
        scheme = parts.scheme.lower()
    except ValueError:
        # Malformed authority (e.g. "http://[::1"): fall back to cutting
        # query and fragment by hand so no token survives.
        cut = re.split(r"[?#]", url, maxsplit=1)[0]
        return cut + tail
    if not has_scheme:
        return f"{host}{path}{tail}"
    return f"{scheme}://{host}{path}{tail}"


def clean_text(text: str) -> str:
    """Return ``text`` as one normalised line; see the module docstring.

    >>> clean_text("  电话：１３８－１２３４－５６７８ 😀\\n谢谢！ ")
    '电话：138-1234-5678 谢谢！'
    """
    if not text:
        return ""
    text = _DROP.sub("", text)
    if _NEEDS_WIDTH.search(text) is not None:
        text = text.translate(_WIDTH_TABLE)
    if "://" in text or "www." in text or "WWW." in text:
        text = _URL.sub(_normalise_url, text)
    return _WHITESPACE.sub(" ", text).strip()
