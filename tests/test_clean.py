import time

from hypothesis import given, settings
from hypothesis import strategies as st

from service.clean import clean_text


def test_empty_and_whitespace_only():
    assert clean_text("") == ""
    assert clean_text(" \n\t\u3000 ") == ""


def test_newlines_and_runs_of_whitespace_collapse_to_one_space():
    assert clean_text("  收货人张三\n手机\r\n138\t\t1234 5678  ") == "收货人张三 手机 138 1234 5678"


def test_emoji_are_removed():
    assert clean_text("好的😊谢谢🙏") == "好的谢谢"
    # ZWJ family sequence, skin tone, variation selector, keycap, flag.
    assert clean_text("👨\u200d👩\u200d👧 👍🏽 ❤️ 1\ufe0f\u20e3 🇨🇳 ok") == "1 ok"


def test_control_and_invisible_format_characters_are_removed():
    assert clean_text("a\x00b\x07c\x7fd\x9fe") == "abcde"
    # Zero-width characters inside a number would hide it from the masker.
    assert clean_text("138\u200b1234\u200d5678\ufeff") == "13812345678"
    assert clean_text("\u202eabc\u202c") == "abc"


def test_full_width_digits_letters_and_ascii_symbols_become_ascii():
    assert clean_text("１３８－１２３４－５６７８") == "138-1234-5678"
    assert clean_text("ＡＢＣ＠ｑｑ．ｃｏｍ") == "ABC@qq.com"
    assert clean_text("＋８６　１３８") == "+86 138"
    assert clean_text("￥１９９．００") == "¥199.00"


def test_chinese_punctuation_is_kept():
    text = "你好，请问几号发货？谢谢！时间：明天；地点（门口）。"
    assert clean_text(text) == text


def test_url_query_fragment_and_credentials_are_dropped():
    assert clean_text("看这个 https://shop.example.com/item/123?token=abc&sig=1#frag 谢谢") == (
        "看这个 https://shop.example.com/item/123 谢谢"
    )
    assert clean_text("http://user:secret@Example.COM:8080/a?b=c") == "http://example.com:8080/a"
    assert clean_text("链接https://a.cn/x?y=1看一下") == "链接https://a.cn/x看一下"
    assert clean_text("见www.example.com/p?ref=chat。") == "见www.example.com/p。"


def test_sentence_punctuation_after_url_is_kept():
    assert clean_text("(see https://a.cn/b?c=d).") == "(see https://a.cn/b)."


def test_malformed_url_does_not_raise_and_loses_its_query():
    assert clean_text("http://[::1/x?token=1") == "http://[::1/x"


def test_lone_surrogates_are_dropped():
    assert clean_text("a\ud800b\udfffc") == "abc"
    # The result can always be encoded.
    clean_text("\udcff" * 10).encode("utf-8")


def test_huge_input_is_linear():
    text = ("你好😊 １３８ https://a.cn/x?y=z \n" * 50_000) + "\x00" * 100_000
    start = time.perf_counter()
    out = clean_text(text)
    assert time.perf_counter() - start < 10
    assert "\n" not in out and "\x00" not in out


@settings(max_examples=500, deadline=None)
@given(st.text())
def test_never_raises_and_output_is_one_stripped_line(text):
    out = clean_text(text)
    assert isinstance(out, str)
    assert out == out.strip()
    assert "\n" not in out and "  " not in out
    out.encode("utf-8")  # no lone surrogates


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            ["https://", "www.", "a.cn", "/p", "?q=1", "#f", "@", ":", "，", "😊", "\u200b", "１", " ", "\n", "x", "中"]
        )
        | st.text(max_size=3)
    ).map("".join)
)
def test_cleaning_is_idempotent(text):
    once = clean_text(text)
    assert clean_text(once) == once
