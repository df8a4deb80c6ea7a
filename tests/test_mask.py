import io
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.bench_mask import evaluate
from benchmarks.pii_set import generate
from service.clean import clean_text
from service.mask import PII_TYPES, PLACEHOLDERS, Masked, id_card_valid, main, mask_text

# Synthetic values with valid checksums.
ID_18 = "440305199003071236"
ID_18_X = "11010519491231002X"
ID_18_BAD_CHECK = "440305199003071235"  # also fails Luhn, so it can't become a card
ID_15 = "110105491231002"
CARD_19 = "6222021234567890128"
CARD_16 = "6225880669074396"
CARD_BAD_LUHN = "6222021234567890121"


def masked(text: str) -> str:
    return mask_text(clean_text(text)).text


def test_public_constants():
    assert PII_TYPES == (
        "mobile", "landline", "id_card", "bank_card", "email", "address", "name", "passport", "im_account",
    )
    assert PLACEHOLDERS == {
        "mobile": "[手机号]",
        "landline": "[固话]",
        "id_card": "[身份证号]",
        "bank_card": "[银行卡号]",
        "email": "[邮箱]",
        "address": "[地址]",
        "name": "[姓名]",
        "passport": "[护照号]",
        "im_account": "[社交账号]",
    }


def test_masked_is_frozen():
    result = mask_text("电话13812345678")
    assert isinstance(result, Masked)
    with pytest.raises(AttributeError):
        result.text = "x"  # type: ignore[misc]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("我的手机号是13812345678", "我的手机号是[手机号]"),
        ("电话138 1234 5678，谢谢", "电话[手机号]，谢谢"),
        ("打138-1234-5678", "打[手机号]"),
        ("+86 13812345678", "[手机号]"),
        ("0086 199 8765 4321联系", "[手机号]联系"),
        ("(+86)15912345678", "[手机号]"),
        ("手机：17712345678。", "手机：[手机号]。"),
        # The country code typed without "+" or "00".
        ("电话8613912345678", "电话[手机号]"),
        ("86 139 1234 5678 打这个", "[手机号] 打这个"),
        # Spelled in Chinese numerals, as people write it to get past chat filters.
        ("手机号：一三八一二三四五六七八", "手机号：[手机号]"),
        ("打幺三九 〇〇〇〇 一二三四", "打[手机号]"),
    ],
)
def test_mobile(text, expected):
    assert masked(text) == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        ("座机010-62345678", "座机[固话]"),
        ("打0755 8888 6666找前台", "打[固话]找前台"),
        ("(021)12345678", "[固话]"),
        ("（0571）88886666转123", "[固话]"),
        ("公司电话028-8765 4321-801，工作日", "公司电话[固话]，工作日"),
        ("01062345678", "[固话]"),
    ],
)
def test_landline(text, expected):
    assert masked(text) == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        (f"身份证号{ID_18}", "身份证号[身份证号]"),
        (f"证件：{ID_18_X}，请核实", "证件：[身份证号]，请核实"),
        (f"{ID_18_X.lower()}是我的", "[身份证号]是我的"),
        (f"身份证 {ID_18[:6]} {ID_18[6:14]} {ID_18[14:]}", "身份证 [身份证号]"),
        (f"老身份证{ID_15}", "老身份证[身份证号]"),
    ],
)
def test_id_card(text, expected):
    assert masked(text) == expected


def test_id_card_checksum_matters():
    assert id_card_valid(ID_18) and id_card_valid(ID_18_X)
    assert not id_card_valid(ID_18_BAD_CHECK)
    assert masked(f"身份证{ID_18}") == "身份证[身份证号]"
    assert masked(f"身份证{ID_18_BAD_CHECK}") == f"身份证{ID_18_BAD_CHECK}"


def test_id_card_needs_a_real_birth_date():
    # 1990-02-30 does not exist; check digit recomputed so only the date is wrong.
    first17 = "44030519900230123"
    weights = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
    check = "10X98765432"[sum(int(c) * w for c, w in zip(first17, weights)) % 11]
    assert not id_card_valid(first17 + check)
    assert "[身份证号]" not in masked(f"身份证{first17 + check}")


@pytest.mark.parametrize(
    "text, expected",
    [
        (f"退款到{CARD_19}", "退款到[银行卡号]"),
        (f"卡号 {CARD_16} 谢谢", "卡号 [银行卡号] 谢谢"),
        ("卡号6222 0212 3456 7890 128", "卡号[银行卡号]"),
        ("6222-0212-3456-7890-128这张卡", "[银行卡号]这张卡"),
    ],
)
def test_bank_card(text, expected):
    assert masked(text) == expected


def test_bank_card_luhn_matters():
    assert masked(f"卡号{CARD_BAD_LUHN}") == f"卡号{CARD_BAD_LUHN}"


@pytest.mark.parametrize(
    "text",
    [
        f"订单号{CARD_19}",  # an order number that happens to pass Luhn
        f"订单号：{CARD_16}",
        f"单号 {CARD_19}",
        f"order no. {CARD_19}",
        f"快递单号{CARD_16}",
        f"订单{ID_18}",  # an order number that passes the ID checksum
        "订单号202611031234什么时候发",
        "价格¥199.00，运费12元",
        "2026-11-03下的单，20261103到货",
        "货号：A1234567，SKU 100234567890",
        "快递单号SF1234567890123一直不更新",
        "YT1234567890123",
        "买了3件，x2",
        f"页面显示{CARD_BAD_LUHN[:16]}",
        "会员编码10012345678",
        "工号12345678901",
        "客服电话400-820-8820",
        "验证码482913",
        "工作时间9:00-18:00",
        "11月3号送到可以吗",
        "送到楼下就行",
        "地址没问题",
        "我是客户",
        "我是学生，想问下优惠",
        "我是黄金会员",
        "本人已收到",
        "户名一致",
        "联系人填错了",
        "收件人是公司前台",
        "我是华为手机用户",
        "我是李宁的粉丝",
        "联系人王总",
        "发到上海市的仓库",
        "我住3栋",
        "IMEI 861234567890123",
        "微信支付单号4200001234202611031234567890",
    ],
)
def test_look_alikes_survive(text):
    cleaned = clean_text(text)
    result = mask_text(cleaned)
    assert result.text == cleaned
    assert result.counts == {}


@pytest.mark.parametrize(
    "text, expected",
    [
        ("发票发到邮箱zhangwei88@qq.com", "发票发到邮箱[邮箱]"),
        ("Email: Li.Na_2020@mail.ustc.edu.cn", "Email: [邮箱]"),
        ("13812345678@163.com这个邮箱", "[邮箱]这个邮箱"),
        ("邮箱地址：abc@gmail.com", "邮箱地址：[邮箱]"),
    ],
)
def test_email(text, expected):
    assert masked(text) == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        ("北京市朝阳区建国路88号SOHO现代城2号楼1203室", "[地址]"),
        ("广东省深圳市南山区科技园路1号", "[地址]"),
        ("上海浦东新区张江路100弄5号", "[地址]"),
        ("收货地址：浙江省杭州市西湖区文三路90号东部软件园3号楼，谢谢", "收货地址：[地址]，谢谢"),
        ("麻烦寄到江苏省南京市鼓楼区中山路1号吧", "麻烦寄到[地址]吧"),
        ("送到成都市武侯区天府大道100号3栋2单元801", "送到[地址]"),
        ("我家在河南省周口市淮阳县城关镇王庄村", "我家在[地址]"),
        ("地址：北京市海淀区", "地址：[地址]"),
    ],
)
def test_address(text, expected):
    assert masked(text) == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        ("我叫张伟", "我叫[姓名]"),
        ("你好我叫欧阳娜娜，想问下", "你好我叫[姓名]，想问下"),
        ("我是李明，订单有问题", "我是[姓名]，订单有问题"),
        ("收件人：王芳", "收件人：[姓名]"),
        ("收货人陈杰电话13812345678", "收货人[姓名]电话[手机号]"),
        ("联系人是刘洋", "联系人是[姓名]"),
        ("姓名：赵敏", "姓名：[姓名]"),
        ("名字叫孙浩然", "名字叫[姓名]"),
        ("本人周杰，申请退款", "本人[姓名]，申请退款"),
        ("帮我把收货人改成郑秀红", "帮我把收货人改成[姓名]"),
        ("张伟 13812345678 北京市朝阳区建国路88号", "[姓名] [手机号] [地址]"),
        ("收件人写的蒋雯雯", "收件人写的[姓名]"),
        ("我朋友叫沈浩，他帮我收一下", "我朋友叫[姓名]，他帮我收一下"),
        ("我姓黄，黄晓明，电话13812345678", "我姓黄，[姓名]，电话[手机号]"),
        ("my name is John Smith", "my name is [姓名]"),
        ("收件人张先生", "收件人张先生"),
    ],
)
def test_name(text, expected):
    assert masked(text) == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        ("护照号E12345678", "护照号[护照号]"),
        ("我的护照号码是EA1234567，海外直邮要填", "我的护照号码是[护照号]，海外直邮要填"),
        ("passport no. G12345678", "passport no. [护照号]"),
        ("货号E12345678", "货号E12345678"),  # no passport cue
    ],
)
def test_passport(text, expected):
    assert masked(text) == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        ("加我微信：lily_2020", "加我微信：[社交账号]"),
        ("微信号是zhangwei88，发图片给你", "微信号是[社交账号]，发图片给你"),
        ("微信号：lilyzhang", "微信号：[社交账号]"),  # letters only: fine after an explicit 微信号
        ("vx zhang-wei-1990", "vx [社交账号]"),
        ("WeChat ID: lily2020", "WeChat ID: [社交账号]"),
        ("wxid_k3j9x2m1p0 加我", "[社交账号] 加我"),
        ("QQ号123456789，有事留言", "QQ号[社交账号]，有事留言"),
        ("扣扣 10001", "扣扣 [社交账号]"),
        ("微信同号13812345678", "微信同号[手机号]"),  # a phone number stays a phone number
        ("qq邮箱12345@qq.com", "qq邮箱[邮箱]"),
        ("QQ/微信同号：zhang_wei88", "QQ/微信同号：[社交账号]"),
        ("急事QQ找我81842213", "急事QQ找我[社交账号]"),
        ("能加个微信吗？我的是tony_bj97", "能加个微信吗？我的是[社交账号]"),
        ("lily_2020 这是我微信，加一下", "[社交账号] 这是我微信，加一下"),
        ("my wechat is Ivy_Chen", "my wechat is [社交账号]"),
        # The usual pasted block: the name is found with an account between it and the phone.
        ("王伟 微信kevin1002 手机13812345678", "[姓名] 微信[社交账号] 手机[手机号]"),
    ],
)
def test_im_account(text, expected):
    assert masked(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "用微信支付付的款",
        "微信 payment 怎么用",  # no 号/id and nothing id-like: an ordinary word
        "wechat pay 付款失败",
        "QQ音乐会员到期了",
        "QQ群 123456789 里说的活动",
        "微信版本8.0.49",
        "一二三四五六七八九十",
        "第一三五七九排",
    ],
)
def test_im_and_numeral_look_alikes_survive(text):
    assert masked(text) == clean_text(text)


def test_existing_placeholders_are_left_alone_and_not_counted():
    text = "[图片] 我的手机是[手机号]，地址[地址]，姓名[姓名]，[银行卡号]"
    result = mask_text(text)
    assert result.text == text
    assert result.counts == {}

    result = mask_text("[手机号] 13812345678")
    assert result.text == "[手机号] [手机号]"
    assert result.counts == {"mobile": 1}


def test_counts_per_type_only_non_zero():
    result = mask_text(
        clean_text("收件人：张伟，电话13812345678或13912345678，座机010-62345678，身份证" + ID_18)
    )
    assert result.counts == {"mobile": 2, "landline": 1, "id_card": 1, "name": 1}
    assert mask_text("没有个人信息").counts == {}


def test_full_width_digits_are_masked_after_cleaning():
    assert masked("手机１３８１２３４５６７８") == "手机[手机号]"
    assert masked("身份证" + ID_18.translate(str.maketrans("0123456789", "０１２３４５６７８９"))) == (
        "身份证[身份证号]"
    )
    assert masked("１３８\u200b１２３４　５６７８") == "[手机号]"


def test_main_reads_stdin_and_writes_masked_lines(monkeypatch, capsys):
    data = "电话：１３８１２３４５６７８😊\n我叫张伟\n\n".encode("utf-8") + b"\xff\n"
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))
    main()
    assert capsys.readouterr().out == "电话：[手机号]\n我叫[姓名]\n\n\ufffd\n"


# Fragments that make random text hit the interesting code paths: cues,
# digits, placeholders, separators.
_FRAGMENTS = st.sampled_from(
    [
        "我叫", "我是", "收件人", "姓名", "地址", "寄到", "送到", "订单号", "护照", "passport",
        "路", "号", "弄", "栋", "室", "村", "镇", "县", "区", "市", "北京", "张", "伟", "欧阳",
        "1", "3", "8", "0", "9", "X", "E", " ", "-", "+86", "(", ")", "（", "）", "@", ".com",
        "，", "：", "[手机号]", "[地址]", "[姓名]", "[图片]", "13812345678", "010-62345678",
        ID_18, CARD_19, "abc@qq.com", "E12345678", "建国路88号", "2号楼1203室",
        "微信", "微信号", "vx", "QQ", "扣扣", "wxid_", "lily_2020", "一", "三", "八", "〇", "幺", "86",
        "这是我微信", "我的是", "/", "同号", "找我", "my wechat is ", "[社交账号]",
    ]
)
_MESSY_TEXT = st.lists(_FRAGMENTS | st.text(max_size=4), max_size=25).map("".join)


@settings(max_examples=1000, deadline=None)
@given(st.text() | _MESSY_TEXT)
def test_never_raises_and_is_idempotent(text):
    once = mask_text(text)
    assert isinstance(once.text, str)
    assert all(kind in PII_TYPES and n > 0 for kind, n in once.counts.items())
    twice = mask_text(once.text)
    assert twice.text == once.text
    assert twice.counts == {}


@settings(max_examples=300, deadline=None)
@given(st.text() | _MESSY_TEXT)
def test_clean_then_mask_never_raises_and_is_idempotent(text):
    once = mask_text(clean_text(text)).text
    assert mask_text(clean_text(once)).text == once


def test_labelled_set_meets_targets():
    report = evaluate(generate())
    for kind in PII_TYPES:
        figures = report[kind]
        assert figures["spans"] >= 100, kind
        assert figures["recall"] >= 0.995, (kind, figures)
        assert figures["precision"] >= 0.98, (kind, figures)
    assert report["_negatives"]["survived"] >= 0.98
