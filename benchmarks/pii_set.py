"""Generate the labelled Chinese PII set used by ``bench_mask.py`` and the tests.

Usage::

    .venv/bin/python benchmarks/pii_set.py            # writes benchmarks/data/pii_labelled.jsonl

Every line is ``{"text": ..., "spans": [{"type": ..., "value": ...}],
"negatives": [...]}``:

* ``text`` is a raw chat message (it still has to go through ``clean_text``;
  some messages carry full-width digits, emoji, zero-width characters or
  newlines);
* ``spans`` are the personal values in it, ``value`` exactly as it appears in
  ``text``; ``type`` is a key of ``service.mask.PII_TYPES``;
* ``negatives`` are look-alikes that must survive masking: order numbers
  (some pass Luhn or the ID checksum), prices, dates, SKUs, tracking numbers,
  quantities, Luhn-failing card-length numbers, 11-digit numbers that are not
  mobiles, role words after name cues ("我是客户"), and app/product words
  and numbers next to IM cues ("QQ音乐", "QQ群 123456789", "微信版本8.0.49").

Mobile numbers also come as ``86``-prefixed numbers without ``+`` and,
rarely, spelled in Chinese numerals ("一三八 幺二三四 五六七八"). ``im_account``
spans are WeChat ids and QQ numbers given in chat; the span is the id
alone, never the cue word in front of it.

All values are synthetic and generated to be *valid*: ID numbers carry a
correct MOD 11-2 check digit and a real birth date, bank cards pass Luhn and
start with real BINs, phones use real mobile prefixes and area codes.

The sentence templates here were written separately from the masking rules
and deliberately include phrasings the rules were not written around
("帮我把收货人改成…", addresses pasted without any cue, numbers split by
zero-width spaces).
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

SEED = 20261103
# Big enough that the rarest type (passport) keeps >= 100 spans now that
# im_account templates take their share: 2400 left it at 107 with this seed.
SIZE = 2800
OUTPUT = Path(__file__).resolve().parent / "data" / "pii_labelled.jsonl"

# ---------------------------------------------------------------------------
# Value generators
# ---------------------------------------------------------------------------

MOBILE_PREFIXES = (
    "130 131 132 133 134 135 136 137 138 139 145 147 149 150 151 152 153 155 156 157 "
    "158 159 162 165 166 167 170 171 172 173 175 176 177 178 180 181 182 183 184 185 "
    "186 187 188 189 190 191 192 193 195 196 197 198 199"
).split()

# Area code -> local number length.
AREA_CODES = {
    "010": 8, "020": 8, "021": 8, "022": 8, "023": 8, "024": 8, "025": 8, "027": 8,
    "028": 8, "029": 8, "0311": 8, "0351": 8, "0371": 8, "0431": 8, "0451": 8,
    "0512": 8, "0531": 8, "0532": 8, "0551": 8, "0571": 8, "0574": 8, "0591": 8,
    "0592": 7, "0731": 8, "0755": 8, "0757": 8, "0769": 8, "0791": 8, "0851": 8,
    "0871": 8, "0898": 8, "0931": 7, "0951": 7, "0971": 7, "0991": 8, "0535": 7,
}

ID_REGIONS = (
    "110101 110105 110108 120101 130102 140105 210102 220102 230103 310104 310115 "
    "320102 320583 330106 330212 340104 350203 360102 370202 410105 420106 430104 "
    "440106 440305 440604 450103 460105 500103 510104 520102 530102 610113 620102 "
    "630102 640104 650102"
).split()
ID_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
ID_CHECK = "10X98765432"

# Issuer prefix -> card length.
CARD_BINS = {
    "622202": 19, "621226": 19, "622848": 19, "621700": 19, "622700": 19,
    "601382": 19, "621661": 19, "622262": 19, "622588": 16, "621483": 16,
    "628288": 16, "625907": 16, "436742": 19, "403391": 16, "512315": 16,
    "622609": 16, "621799": 19, "623668": 19, "622150": 19, "621098": 19,
}

SURNAMES = (
    "王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗郑梁谢宋唐许韩冯邓曹彭曾肖田董袁潘于蒋蔡"
    "余杜叶程苏魏吕丁任沈姚卢姜崔钟谭陆汪范金石廖贾夏韦付方白邹孟熊秦邱江尹薛闫段雷侯"
    "龙史陶黎贺顾毛郝龚邵万钱严覃武戴莫孔向汤"
)
COMPOUND_SURNAMES = ("欧阳", "司马", "诸葛", "上官", "东方", "慕容")
GIVEN_CHARS = (
    "伟芳娜敏静丽强磊军洋勇艳杰娟涛明超秀霞平刚桂英华玉萍红鹏辉斌宇浩凯健俊帆帅旭宁龙"
    "林欣佳琳雪梅丹玲婷晨阳博文昊然子涵思雨梓轩一诺可馨怡嘉雅海波志建国荣春燕慧颖瑶晓"
    "东峰亮成飞立兰凤云珍莉倩琪蕾薇颖璐鑫锋昕睿泽航宏彬"
)
ENGLISH_NAMES = (
    "John Smith", "Li Wei", "Wang Fang", "Zhang Min", "Emily Chen", "David Liu",
    "Chen Jie", "Michael Zhou", "Sarah Lin", "Kevin Wu", "Lucy Huang", "Tony Ma",
)

EMAIL_USERS = (
    "zhangwei", "li.na", "wangfang88", "chenjie_sh", "liuyang", "xiaoming.zh",
    "huang_lei", "zhao.min", "sunny.wu", "yangyang", "jack.lee", "kevin2020",
    "tianxin", "amy_chen", "linlin", "hxq", "guo.peng", "mia.song",
)
EMAIL_DOMAINS = (
    "qq.com", "163.com", "126.com", "gmail.com", "sina.com", "outlook.com",
    "foxmail.com", "hotmail.com", "139.com", "yeah.net", "aliyun.com",
    "company.com.cn", "mail.ustc.edu.cn", "sohu.com",
)

# (province, city, districts): municipalities have no province.
REGIONS = (
    ("", "北京市", ("朝阳区", "海淀区", "东城区", "西城区", "丰台区", "通州区", "昌平区")),
    ("", "上海市", ("浦东新区", "徐汇区", "静安区", "长宁区", "闵行区", "黄浦区", "杨浦区")),
    ("", "天津市", ("和平区", "南开区", "河西区", "滨海新区")),
    ("", "重庆市", ("渝中区", "江北区", "南岸区", "沙坪坝区")),
    ("广东省", "深圳市", ("南山区", "福田区", "宝安区", "龙岗区", "罗湖区")),
    ("广东省", "广州市", ("天河区", "越秀区", "海珠区", "番禺区", "白云区")),
    ("广东省", "东莞市", ("南城街道", "东城街道")),
    ("浙江省", "杭州市", ("西湖区", "滨江区", "余杭区", "拱墅区", "上城区")),
    ("浙江省", "宁波市", ("鄞州区", "海曙区")),
    ("江苏省", "南京市", ("鼓楼区", "玄武区", "建邺区", "江宁区")),
    ("江苏省", "苏州市", ("工业园区", "姑苏区", "吴中区")),
    ("四川省", "成都市", ("武侯区", "锦江区", "高新区", "青羊区", "双流区")),
    ("湖北省", "武汉市", ("洪山区", "江汉区", "武昌区", "东西湖区")),
    ("陕西省", "西安市", ("雁塔区", "碑林区", "未央区")),
    ("山东省", "青岛市", ("市南区", "崂山区", "黄岛区")),
    ("山东省", "济南市", ("历下区", "槐荫区")),
    ("福建省", "厦门市", ("思明区", "湖里区")),
    ("河南省", "郑州市", ("金水区", "二七区", "中原区")),
    ("湖南省", "长沙市", ("岳麓区", "芙蓉区", "雨花区")),
    ("安徽省", "合肥市", ("蜀山区", "包河区")),
    ("辽宁省", "沈阳市", ("和平区", "浑南区")),
    ("云南省", "昆明市", ("五华区", "盘龙区")),
    ("广西壮族自治区", "南宁市", ("青秀区", "西乡塘区")),
    ("新疆维吾尔自治区", "乌鲁木齐市", ("天山区", "沙依巴克区")),
    ("河北省", "石家庄市", ("长安区", "桥西区")),
)
ROADS = (
    "建国路", "中山路", "人民路", "解放路", "科技园路", "张江路", "文三路", "天府大道",
    "珞喻路", "长安街", "南京西路", "淮海中路", "发展大道", "学府路", "和平里大街",
    "深南大道", "滨海大道", "五一路", "金水路", "延安西路", "东风路", "香港中路",
    "华山路", "新华街", "光明巷", "幸福路", "体育西路", "江南大道", "中关村大街", "西湖大道",
)
COMMUNITIES = (
    "SOHO现代城", "阳光花园", "万科城", "碧桂园", "东部软件园", "望京花园", "金地名苑",
    "华润大厦", "保利中心", "绿地广场", "幸福里小区", "翠苑一区", "世纪公寓", "中海国际社区",
)
RURAL = (
    ("河南省", "周口市", "淮阳县", "城关镇", "王庄村"),
    ("山东省", "菏泽市", "曹县", "青堌集镇", "李屯村"),
    ("四川省", "南充市", "仪陇县", "马鞍镇", "新政村"),
    ("湖南省", "邵阳市", "隆回县", "桃洪镇", "红星村"),
    ("安徽省", "阜阳市", "临泉县", "杨桥镇", "刘庄村"),
    ("河北省", "保定市", "涞水县", "永阳镇", "北洛平村"),
)

FULLWIDTH = str.maketrans("0123456789-+", "０１２３４５６７８９－＋")

# Digits spelled out, as customers type them to get past "no phone numbers"
# filters. 1 and 0 have a second spelling (幺 as read out over the phone,
# 〇/零); a writer mostly sticks to one spelling for the whole number.
CN_DIGITS = dict(zip("23456789", "二三四五六七八九"))

# Handles people build WeChat ids from (pinyin names, English names, nicknames),
# and words they tack on. Letters only: separators and digits are added by
# Values.wechat_id().
WECHAT_HANDLES = (
    "lily", "zhangwei", "xiaoming", "amy", "sunny", "kevin", "chenjie", "wangfang",
    "tianxin", "mia", "jack", "huanglei", "yoyo", "linlin", "dabao", "momo", "coco",
    "leo", "xiaoyu", "ayu", "mengmeng", "zhaomin", "liuyang", "tony", "ivy", "grace",
    "qiqi", "lisa", "haoran", "xiaohui", "alex", "doudou",
)
WECHAT_WORDS = (
    "chen", "wang", "sky", "love", "happy", "cat", "sh", "bj", "gz", "home", "shop",
    "mama", "baby", "zz", "vip", "online",
)
# Two-syllable pinyin names, for ids written syllable by syllable ("zhang-wei-1990").
PINYIN_NAMES = (
    ("zhang", "wei"), ("wang", "fang"), ("chen", "jie"), ("huang", "lei"), ("liu", "yang"),
    ("zhao", "min"), ("xiao", "ming"), ("hao", "ran"), ("tian", "xin"), ("li", "na"),
    ("sun", "li"), ("zhou", "jie"),
)
ID_CHARS = "abcdefghijklmnopqrstuvwxyz0123456789"


def luhn_complete(prefix: str, length: int, rng: random.Random) -> str:
    body = prefix + "".join(rng.choice("0123456789") for _ in range(length - len(prefix) - 1))
    for check in "0123456789":
        if luhn_ok(body + check):
            return body + check
    raise AssertionError("unreachable")


def luhn_ok(number: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(number)):
        d = int(ch) * (2 if i % 2 else 1)
        total += d - 9 if d > 9 else d
    return total % 10 == 0


def id_check_digit(first17: str) -> str:
    return ID_CHECK[sum(int(c) * w for c, w in zip(first17, ID_WEIGHTS)) % 11]


def random_birth(rng: random.Random, start: int = 1950, end: int = 2006) -> tuple[int, int, int]:
    year = rng.randint(start, end)
    month = rng.randint(1, 12)
    days = [31, 29 if year % 4 == 0 and (year % 100 or year % 400 == 0) else 28,
            31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1]
    return year, month, rng.randint(1, days)


class Values:
    """Random but valid personal values, each in one of several spellings."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def digits(self, n: int) -> str:
        return "".join(self.rng.choice("0123456789") for _ in range(n))

    def mobile(self) -> str:
        r = self.rng
        number = r.choice(MOBILE_PREFIXES) + self.digits(8)
        a, b, c = number[:3], number[3:7], number[7:]
        if r.random() < 1 / 15:
            return self.chinese_mobile(number)
        form = r.choice((
            number, number, number, f"{a} {b} {c}", f"{a}-{b}-{c}", f"+86 {number}",
            f"+86{number}", f"0086 {a} {b} {c}", f"+86-{a}-{b}-{c}", f"{a}{b} {c}",
            # Country code typed without "+" or "00": still a mobile number.
            f"86{number}", r.choice((f"86 {number}", f"86-{a}-{b}-{c}", f"86 {a} {b} {c}")),
        ))
        if r.random() < 0.06:
            form = form.translate(FULLWIDTH)
        return form

    def chinese_mobile(self, number: str) -> str:
        """``number`` spelled in Chinese numerals, sometimes grouped 3-4-4."""
        r = self.rng
        spell = dict(CN_DIGITS, **{"0": r.choice(("〇", "零")), "1": "幺" if r.random() < 0.3 else "一"})
        words = "".join(spell[d] for d in number)
        if spell["1"] == "幺" and r.random() < 0.3:
            words = "一" + words[1:]  # 幺 only after the leading 1, as read out: 一三八幺二…
        if r.random() < 0.25:
            words = f"{words[:3]} {words[3:7]} {words[7:]}"
        return words

    def landline(self) -> str:
        r = self.rng
        area = r.choice(tuple(AREA_CODES))
        local = str(r.randint(2, 8)) + self.digits(AREA_CODES[area] - 1)
        half = len(local) - 4
        forms = [
            f"{area}-{local}", f"{area}-{local}", f"{area} {local[:half]} {local[half:]}",
            f"({area}){local}", f"（{area}）{local}", f"{area}{local}",
            f"{area}-{local[:half]}-{local[half:]}", f"{area} {local}",
        ]
        form = r.choice(forms)
        if r.random() < 0.15:
            form += r.choice(("-", "转", " 转 ", " ext.")) + str(r.randint(1, 9999))
        return form

    def id_card(self) -> str:
        r = self.rng
        if r.random() < 0.12:  # 15-digit first-generation card
            y, m, d = random_birth(r, 1930, 1983)
            return f"{r.choice(ID_REGIONS)}{y % 100:02d}{m:02d}{d:02d}{self.digits(3)}"
        y, m, d = random_birth(r)
        first17 = f"{r.choice(ID_REGIONS)}{y:04d}{m:02d}{d:02d}{self.digits(3)}"
        number = first17 + id_check_digit(first17)
        if number.endswith("X") and r.random() < 0.3:
            number = number[:-1] + "x"
        if r.random() < 0.07:
            number = f"{number[:6]} {number[6:14]} {number[14:]}"
        return number

    def bank_card(self) -> str:
        r = self.rng
        prefix = r.choice(tuple(CARD_BINS))
        number = luhn_complete(prefix, CARD_BINS[prefix], r)
        form = r.choice(("plain", "plain", "plain", "space", "space", "dash"))
        if form == "plain":
            return number
        groups = [number[i : i + 4] for i in range(0, len(number), 4)]
        return (" " if form == "space" else "-").join(groups)

    def email(self) -> str:
        r = self.rng
        user = r.choice(EMAIL_USERS)
        if r.random() < 0.5:
            user += str(r.randint(1, 2024))
        if r.random() < 0.1:
            user = r.choice(MOBILE_PREFIXES) + self.digits(8)  # phone-number mailbox
        if r.random() < 0.1:
            user = user.upper()
        return f"{user}@{r.choice(EMAIL_DOMAINS)}"

    def name(self) -> str:
        r = self.rng
        surname = r.choice(COMPOUND_SURNAMES) if r.random() < 0.05 else r.choice(SURNAMES)
        given = "".join(r.choice(GIVEN_CHARS) for _ in range(1 if r.random() < 0.35 else 2))
        return surname + given

    def english_name(self) -> str:
        return self.rng.choice(ENGLISH_NAMES)

    def passport(self) -> str:
        r = self.rng
        kind = r.random()
        if kind < 0.5:
            return "E" + self.digits(8)
        if kind < 0.8:
            return "E" + r.choice("ABCDEFGHJKLMNPQRSTUVWXYZ") + self.digits(7)
        return "G" + self.digits(8)

    def im_account(self, platform: str | None = None, explicit: bool = False) -> str:
        """A WeChat id or QQ number; ``platform`` comes from the cue in the
        template ("qq", "wechat", or None when the sentence doesn't say)."""
        if platform is None:
            platform = "qq" if self.rng.random() < 0.4 else "wechat"
        return self.qq_number() if platform == "qq" else self.wechat_id(explicit)

    def qq_number(self) -> str:
        """5-11 digits, no leading 0. Most numbers in use today have 9 or 10
        digits (10-digit ones stay under ~4e9, so start with 1-3); short ones
        are old accounts. 11-digit ones start with 2 or 3 here so that no QQ
        number is also a valid mobile number, which would make the label
        ambiguous."""
        r = self.rng
        length = r.choices((5, 6, 7, 8, 9, 10, 11), weights=(2, 3, 5, 12, 35, 35, 8))[0]
        first = r.choice("23" if length == 11 else "123" if length == 10 else "123456789")
        number = first + self.digits(length - 1)
        if r.random() < 0.05:
            number = number.translate(FULLWIDTH)
        return number

    def wechat_id(self, explicit: bool = False) -> str:
        """6-20 characters, a letter first, then letters, digits, "_" or "-".

        Only a sentence that says 微信号/WeChat ID outright gets a letters-only
        id ("lilychen"): after a bare "vx" or "微信" such a word could be any
        word, and nobody can tell it is an account."""
        r = self.rng
        while True:
            style = r.random()
            handle = r.choice(WECHAT_HANDLES)
            if explicit and style < 0.2:
                wid = handle + r.choice(WECHAT_WORDS)
            elif style < 0.3:  # the id WeChat assigns when the user never set one
                wid = "wxid_" + "".join(r.choice(ID_CHARS) for _ in range(r.choice((10, 12, 14))))
            elif style < 0.65:  # lily_2020, zhangwei-88, kevin1990
                tail = r.choice((str(r.randint(1975, 2012)), str(r.randint(1, 999)),
                                 f"{r.randint(1, 12):02d}{r.randint(1, 28):02d}"))
                wid = handle + r.choice(("_", "-", "", "")) + tail
            elif style < 0.8:  # amy_chen, sunny-sky
                wid = handle + r.choice("_-") + r.choice(WECHAT_WORDS)
                if r.random() < 0.4:
                    wid += str(r.randint(1, 99))
            elif style < 0.9:  # Amy0520, Kevin_Wu
                wid = handle.capitalize() + r.choice((f"{r.randint(1, 12):02d}{r.randint(1, 28):02d}",
                                                     "_" + r.choice(WECHAT_WORDS).capitalize()))
            else:  # zhang-wei-1990, zhang_wei_88: a name written syllable by syllable
                sep = r.choice("-_")
                wid = sep.join(r.choice(PINYIN_NAMES)) + sep + str(r.choice((r.randint(1975, 2012), r.randint(1, 99))))
            if not (6 <= len(wid) <= 20) or not wid[0].isalpha() or wid.endswith("-"):
                continue
            if explicit or any(ch.isdigit() or ch in "_-" for ch in wid):
                return wid

    def address(self) -> str:
        r = self.rng
        kind = r.random()
        if kind < 0.1:
            prov, city, county, town, village = r.choice(RURAL)
            addr = f"{prov}{city}{county}{town}{village}"
            if r.random() < 0.6:
                addr += f"{r.randint(1, 12)}组"
            if r.random() < 0.3:
                addr += f"{r.randint(1, 99)}号"
            return addr
        prov, city, districts = r.choice(REGIONS)
        district = r.choice(districts)
        road = r.choice(ROADS)
        head = prov + city + district
        if r.random() < 0.25:
            head = city + district  # province left out
        if prov == "" and r.random() < 0.3:
            head = city.rstrip("市") + district  # "上海浦东新区"
        if r.random() < 0.12:
            head = district  # district only, people in the same city do this
        number = f"{r.randint(1, 2999)}号"
        if city == "上海市" and r.random() < 0.4:
            number = f"{r.randint(1, 999)}弄{r.randint(1, 60)}号"
        addr = head + road + number
        extra = r.random()
        if extra < 0.35:
            addr += f"{r.choice(COMMUNITIES)}{r.randint(1, 30)}号楼{r.randint(1, 30)}{r.randint(1, 4):02d}室"
        elif extra < 0.55:
            addr += f"{r.choice(COMMUNITIES)}{r.randint(1, 20)}栋{r.randint(1, 6)}单元{r.randint(1, 33)}0{r.randint(1, 4)}"
        elif extra < 0.65:
            addr += f"{r.randint(1, 40)}楼{r.choice('ABCD')}座"
        elif extra < 0.75:
            addr += f"{r.randint(1, 30)}0{r.randint(1, 8)}室"
        return addr


# ---------------------------------------------------------------------------
# Look-alikes that must survive
# ---------------------------------------------------------------------------


class Negatives:
    def __init__(self, rng: random.Random, values: Values) -> None:
        self.rng = rng
        self.v = values

    def order_luhn(self) -> str:
        """A card-length order number that passes Luhn by chance."""
        length = self.rng.choice((16, 17, 18, 19))
        return luhn_complete(str(self.rng.randint(1, 9)), length, self.rng)

    def order_id_checksum(self) -> str:
        """An order number that is also a checksum-valid ID number."""
        first17 = f"{self.rng.choice(ID_REGIONS)}{2000 + self.rng.randint(0, 20)}0{self.rng.randint(1, 9)}1{self.rng.randint(0, 9)}{self.v.digits(3)}"
        return first17 + id_check_digit(first17)

    def luhn_fail(self, length: int = 16) -> str:
        while True:
            number = str(self.rng.randint(1, 9)) + self.v.digits(length - 1)
            if not luhn_ok(number):
                return number

    def sentence(self) -> tuple[str, list[str]]:
        r = self.rng
        v = self.v
        kind = r.randrange(30)
        if kind == 0:
            n = str(r.randint(1, 9)) + v.digits(11)
            return r.choice((f"订单号{n}什么时候发货", f"我的订单 {n} 还没到", f"订单号：{n}，麻烦查一下")), [n]
        if kind == 1:
            n = self.order_luhn()
            return r.choice((f"订单号{n}已经付款了", f"单号：{n}", f"order no. {n} 请帮忙看看", f"订单编号是{n}，一直显示待发货")), [n]
        if kind == 2:
            n = self.order_id_checksum()
            return r.choice((f"订单{n}的发票开一下", f"订单号 {n} 能改地址吗")), [n]
        if kind == 3:
            price = r.choice((f"¥{r.randint(9, 9999)}.00", f"{r.randint(9, 999)}元", f"￥{r.randint(10, 99)}.{r.randint(10, 99)}", f"{r.randint(1, 9)},{r.randint(100, 999)}元"))
            return r.choice((f"这个多少钱？页面写的{price}", f"我付了{price}，为什么还要补运费", f"退款{price}什么时候到账")), [price]
        if kind == 4:
            date = r.choice((f"2026-{r.randint(1, 12):02d}-{r.randint(1, 28):02d}", f"2026{r.randint(1, 12):02d}{r.randint(1, 28):02d}", f"2026/{r.randint(1, 12)}/{r.randint(1, 28)}"))
            return r.choice((f"{date}下的单", f"预计{date}送达吗", f"我{date}就申请退货了")), [date]
        if kind == 5:
            code = r.choice((f"A{v.digits(7)}", f"SKU{v.digits(12)}", f"{r.choice('ABCDXYZ')}{r.choice('ABCDXYZ')}-{v.digits(4)}"))
            return r.choice((f"货号：{code} 还有货吗", f"商品编号{code}，L码", f"型号 {code} 和上次一样")), [code]
        if kind == 6:
            code = r.choice(("SF", "YT", "JT", "ZTO", "YD")) + v.digits(13)
            return r.choice((f"快递单号{code}一直不更新", f"物流显示{code}已签收，可我没收到", f"{code} 这个单号查不到")), [code]
        if kind == 7:
            code = v.digits(r.choice((12, 14, 15)))
            return r.choice((f"快递单号{code}", f"运单号：{code} 显示在派送中")), [code]
        if kind == 8:
            qty = f"{r.randint(2, 20)}{r.choice('件箱个瓶盒包')}"
            return r.choice((f"我买了{qty}，只收到一半", f"能不能再发{qty}", f"{qty}一起下单有优惠吗")), [qty]
        if kind == 9:
            n = self.luhn_fail(16)
            return r.choice((f"系统提示码{n}是什么意思", f"页面上显示{n}，然后就卡住了", f"批次 {n}")), [n]
        if kind == 10:
            n = r.choice(("10", "12")) + v.digits(9)
            return r.choice((f"会员编码{n}积分没到账", f"这个{n}是什么号", f"工号{n}的客服态度很差")), [n]
        if kind == 11:
            hotline = r.choice(("400-820-8820", "400 888 6666", "95588", "95533", "800-810-8888"))
            return r.choice((f"我打了{hotline}没人接", f"客服电话{hotline}一直占线")), [hotline]
        if kind == 12:
            code = v.digits(6)
            return r.choice((f"验证码{code}收到了", f"取件码 {code}", f"提货码是{code}")), [code]
        if kind == 13:
            word = r.choice(("客户", "学生", "老用户", "新用户", "会员", "买家", "宝妈", "第一次买"))
            return r.choice((f"我是{word}，想问下优惠", f"你好我是{word}", f"我是{word}啊，为什么不给退")), [word]
        if kind == 14:
            word = r.choice(("已收到", "不在家", "确认过了", "同意退款"))
            return r.choice((f"本人{word}", f"本人{word}，谢谢")), [word]
        if kind == 15:
            word = r.choice(("没问题", "写错了", "不对", "已经改好了", "和上次一样"))
            return r.choice((f"地址{word}", f"收货地址{word}吗", f"我看了下地址{word}")), [word]
        if kind == 16:
            word = r.choice(("楼下", "门口", "快递柜", "驿站", "公司前台"))
            return r.choice((f"送到{word}就行", f"能不能寄到{word}", f"放{word}吧")), [word]
        if kind == 17:
            day = f"{r.randint(1, 12)}月{r.randint(1, 28)}号"
            return r.choice((f"{day}送到可以吗", f"最晚{day}能发吗", f"{day}之前一定要到")), [day]
        if kind == 18:
            t = f"{r.randint(8, 21)}:{r.choice(('00', '15', '30', '45'))}"
            return r.choice((f"明天{t}之后在家", f"{t}以后再打过来")), [t]
        if kind == 19:
            n = v.digits(8)
            return r.choice((f"发票号码{n}", f"工单{n}处理到哪了")), [n]
        if kind == 20:
            size = r.choice(("180/96A", "42码", "XL", "500ml", "1.5米"))
            return r.choice((f"尺码{size}有吗", f"换成{size}的")), [size]
        if kind == 21:
            word = r.choice(("黄金会员", "周末下的单", "江苏的", "王者荣耀的皮肤"))
            return f"我是{word}", [word]
        if kind == 22:
            imei = luhn_complete("86" + v.digits(6), 15, r)
            return r.choice((f"手机IMEI：{imei}，保修查一下", f"串号{imei}")), [imei]
        if kind == 23:
            n = "4200" + v.digits(24)
            return r.choice((f"微信支付单号{n}", f"支付宝交易号：{n}")), [n]
        if kind == 24:
            code = self.order_luhn()
            cue = r.choice(("退款单号", "售后单号", "订单号码：", "运单号 "))
            return cue + code + r.choice(("，进度怎么样", "", "一直没处理")), [code]
        if kind == 25:
            hours = r.choice(("9:00-18:00", "10:00-22:00", "08:30-17:30"))
            return r.choice((f"工作时间{hours}", f"营业时间 {hours}，周末休息")), [hours]
        if kind == 27:
            # Numbers after IM cues that are not anybody's account.
            group = str(r.randint(1, 9)) + v.digits(r.randint(6, 9))
            version = f"8.0.{r.randint(20, 55)}"
            steps = str(r.randint(3000, 29999))
            amount = str(r.randint(50, 5000))
            return r.choice((
                (f"QQ群 {group} 里说的活动还有吗", [group]),
                (f"我是在QQ群{group}看到的优惠券", [group]),
                (f"微信版本{version}，扫码一直闪退", [version]),
                (f"wechat 版本 {version} 打不开小程序", [version]),
                (f"微信运动今天{steps}步，活动送的积分呢", [steps]),
                (f"微信转账{amount}给你们客服了，怎么还没发货", [amount]),
            ))
        if kind == 28:
            # App and payment names built on "微信"/"QQ"/"wechat": no account in them.
            return r.choice((
                ("QQ音乐会员到期了，能续吗", ["QQ音乐会员"]),
                ("用微信支付付的款，怎么退", ["微信支付"]),
                ("wechat pay 付款失败了", ["wechat pay"]),
                ("WeChat Pay payment failed, please check", ["WeChat Pay payment failed"]),
                ("QQ浏览器打不开页面", ["QQ浏览器"]),
                ("你们支持微信和支付宝吗", ["微信和支付宝"]),
                ("微信小程序下的单，订单找不到", ["微信小程序"]),
                ("QQ邮箱收不到你们的邮件", ["QQ邮箱"]),
                ("微信 payment 怎么用", ["payment"]),
            ))
        if kind == 29:
            # Chinese numerals in ordinary sentences, not a spelled-out phone number.
            return r.choice((
                ("三五个工作日能到吗", ["三五个工作日"]),
                ("第一三五排的座位还有吗", ["第一三五排"]),
                ("一二十块钱的东西，退个款这么麻烦", ["一二十块钱"]),
                ("一二三四五六七八九十，数了好几遍都少一个", ["一二三四五六七八九十"]),
                ("一百三十八元买的，二十天就坏了", ["一百三十八元"]),
            ))
        word = r.choice(("一致", "没错", "对的"))
        return f"户名{word}，就是我本人", [word]


# ---------------------------------------------------------------------------
# Sentence templates with PII
# ---------------------------------------------------------------------------

# Each template is (format string, types); "{x}" slots are filled from Values.
TEMPLATES: tuple[tuple[str, tuple[str, ...]], ...] = (
    # mobile
    ("我的手机号是{mobile}，有问题打给我", ("mobile",)),
    ("电话{mobile}", ("mobile",)),
    ("快递员打{mobile}就行", ("mobile",)),
    ("麻烦改一下联系电话：{mobile}", ("mobile",)),
    ("{mobile} 这是我老公的号码，送货前联系他", ("mobile",)),
    ("手机换了，新号{mobile}，旧的别打了", ("mobile",)),
    ("你们能回个电话吗{mobile}", ("mobile",)),
    ("加我微信吧，微信号就是手机号{mobile}", ("mobile",)),
    ("打我电话 {mobile} 或者发短信也行", ("mobile",)),
    ("我的联系方式：{mobile}（微信同号）", ("mobile",)),
    ("快递到了给我打电话{mobile}，不在家就放门卫", ("mobile",)),
    ("tel: {mobile}", ("mobile",)),
    ("你们客服让我留个电话，{mobile}", ("mobile",)),
    # landline
    ("公司座机{landline}，工作日有人", ("landline",)),
    ("打{landline}找前台转交", ("landline",)),
    ("固定电话：{landline}", ("landline",)),
    ("我家电话{landline}，白天没人", ("landline",)),
    ("发票上的电话写{landline}", ("landline",)),
    ("办公室电话是{landline}，找王经理", ("landline",)),
    ("晚上打家里{landline}", ("landline",)),
    ("店里的号码{landline}一直打不通吗", ("landline",)),
    # id card
    ("身份证号{id_card}", ("id_card",)),
    ("实名认证一直失败，我的证件号是{id_card}", ("id_card",)),
    ("清关需要身份证：{id_card}，名字对得上", ("id_card",)),
    ("{id_card} 这是我身份证，帮我核对一下", ("id_card",)),
    ("报关要填的号码{id_card}", ("id_card",)),
    ("身份证号码：{id_card}，请核实", ("id_card",)),
    ("购买跨境商品需要实名，证件{id_card}", ("id_card",)),
    ("{id_card}是我妈的身份证，用她的实名可以吗", ("id_card",)),
    # bank card
    ("退款打到这张卡：{bank_card}", ("bank_card",)),
    ("银行卡号{bank_card}，开户行招商银行", ("bank_card",)),
    ("用的是{bank_card}这张卡付的", ("bank_card",)),
    ("我的卡 {bank_card} 被扣了两次钱", ("bank_card",)),
    ("尾号不对，完整卡号{bank_card}", ("bank_card",)),
    ("提现到{bank_card}一直没到账", ("bank_card",)),
    ("工行卡 {bank_card}", ("bank_card",)),
    ("卡号是 {bank_card}，户名一致", ("bank_card",)),
    # email
    ("发票发到邮箱{email}", ("email",)),
    ("我的邮箱是 {email} 谢谢", ("email",)),
    ("把电子合同发{email}就行", ("email",)),
    ("Email: {email}", ("email",)),
    ("{email}这个邮箱收不到验证码", ("email",)),
    ("邮箱地址：{email}", ("email",)),
    ("发我邮箱吧 {email}", ("email",)),
    ("contact me at {email} please", ("email",)),
    # address
    ("收货地址：{address}", ("address",)),
    ("地址是{address}", ("address",)),
    ("寄到{address}吧", ("address",)),
    ("麻烦送到{address}，谢谢", ("address",)),
    ("我家在{address}", ("address",)),
    ("帮我改成{address}", ("address",)),
    ("新的地址 {address}", ("address",)),
    ("{address}", ("address",)),
    ("发货到{address}，别发错了", ("address",)),
    ("上次寄到了{address}，这次一样", ("address",)),
    ("收件地址改一下：{address}", ("address",)),
    ("我现在住{address}，能送吗", ("address",)),
    ("公司地址{address}，前台代收", ("address",)),
    ("请寄往：{address}", ("address",)),
    ("{address} 收", ("address",)),
    ("能送到{address}吗", ("address",)),
    # name
    ("我叫{name}", ("name",)),
    ("你好，我叫{name}，昨天下的单", ("name",)),
    ("收件人：{name}", ("name",)),
    ("收货人{name}，麻烦备注一下", ("name",)),
    ("联系人是{name}", ("name",)),
    ("姓名：{name}", ("name",)),
    ("我的名字叫{name}", ("name",)),
    ("本人{name}，申请退款", ("name",)),
    ("我是{name}，之前联系过你们", ("name",)),
    ("名字叫{name}，你查一下", ("name",)),
    ("帮我把收货人改成{name}", ("name",)),
    ("收件人姓名：{name}", ("name",)),
    ("联系人：{name}先生", ("name",)),
    ("签收人写{name}就行", ("name",)),
    ("持卡人{name}，卡是我本人的", ("name",)),
    ("你好，我是{name}，上周买的耳机坏了", ("name",)),
    ("my name is {english_name}", ("english_name",)),
    ("Hi, my name is {english_name}, I need help with a refund", ("english_name",)),
    # passport
    ("护照号{passport}", ("passport",)),
    ("我的护照号码是{passport}，海外直邮要填", ("passport",)),
    ("护照：{passport}", ("passport",)),
    ("passport no. {passport}", ("passport",)),
    ("用护照实名，{passport}", ("passport",)),
    ("护照号码 {passport}，有效期到2030年", ("passport",)),
    ("Passport: {passport}", ("passport",)),
    ("海关要护照号，我的是{passport}", ("passport",)),
    # im_account: the id alone is the value, the cue word stays
    ("加我微信：{im_account}", ("im_account",)),
    ("微信号是{im_account}，加的时候备注订单号", ("im_account",)),
    ("vx {im_account}", ("im_account",)),
    ("我的wx：{im_account}", ("im_account",)),
    ("QQ号{im_account}", ("im_account",)),
    ("qq：{im_account} 有事留言", ("im_account",)),
    ("扣扣{im_account}", ("im_account",)),
    ("wechat: {im_account}", ("im_account",)),
    ("WeChat ID {im_account}", ("im_account",)),
    ("威信{im_account}", ("im_account",)),
    ("微信 {im_account} 加一下发图片给你", ("im_account",)),
    ("图片发不了，加我V信{im_account}我发给你", ("im_account",)),
    ("{im_account} 这是我微信，加一下", ("im_account",)),
    ("我QQ是{im_account}，截图发你们", ("im_account",)),
    ("售后能加个微信吗？我的是{im_account}", ("im_account",)),
    ("我微信号{im_account}，手机号不是这个", ("im_account",)),
    ("QQ/微信同号：{im_account}", ("im_account",)),
    ("my wechat is {im_account}", ("im_account",)),
    # combinations: pasted shipping blocks and multi-item messages
    ("{name} {mobile} {address}", ("name", "mobile", "address")),
    ("收件人：{name}，电话：{mobile}，地址：{address}", ("name", "mobile", "address")),
    ("收货人{name}\n手机{mobile}\n收货地址{address}", ("name", "mobile", "address")),
    ("{address}，{name}，{mobile}", ("address", "name", "mobile")),
    ("我叫{name}，身份证{id_card}，手机{mobile}", ("name", "id_card", "mobile")),
    ("退款账户：{name}，卡号{bank_card}", ("name", "bank_card")),
    ("联系人：{name} 座机{landline}", ("name", "landline")),
    ("邮箱{email}，电话{mobile}", ("email", "mobile")),
    ("姓名：{name}，护照号：{passport}，邮箱：{email}", ("name", "passport", "email")),
    ("寄到{address}，收件人{name}，{mobile}", ("address", "name", "mobile")),
    ("身份证号{id_card}，银行卡{bank_card}", ("id_card", "bank_card")),
    ("手机{mobile}或者座机{landline}都可以", ("mobile", "landline")),
    ("{name} 微信{im_account} 手机{mobile}", ("name", "im_account", "mobile")),
    ("邮箱{email}，急事QQ找我{im_account}", ("email", "im_account")),
)

# Combinations of PII with a look-alike in the same message.
MIXED_TEMPLATES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("订单号{order}，收货人电话{mobile}", ("mobile",)),
    ("订单号{order_luhn}，退款到{bank_card}", ("bank_card",)),
    ("我的订单{order}改一下地址：{address}", ("address",)),
    ("{date}买的，身份证{id_card}", ("id_card",)),
    ("快递单号{tracking}，手机{mobile}", ("mobile",)),
    ("付了{price}，卡号{bank_card}", ("bank_card",)),
    ("货号{sku}，联系人{name}", ("name",)),
    ("单号：{order_luhn}，收件人{name}，{mobile}", ("name", "mobile")),
    ("订单{order_id}，我的身份证是{id_card}", ("id_card",)),
    ("订单号{order}，加我微信{im_account}发照片，或者打{mobile}", ("im_account", "mobile")),
    ("快递单号{tracking}，收件人{name}，QQ{im_account}", ("name", "im_account")),
    ("付了{price}没收到货，邮箱{email}，wx：{im_account}", ("email", "im_account")),
)

NOISE = ("", "", "", "", "😊", "🙏", "👍", " ", "\n", "～", "呢", "哈")
PREFIXES = ("", "", "", "你好，", "在吗？", "客服你好，", "亲，", "麻烦帮我看下，", "急！", "您好 ", "hi，")
SUFFIXES = ("", "", "", "，谢谢", "，麻烦尽快处理", "，在线等", "。", "！！", "，多谢了", "，辛苦了")


def _im_cue(template: str) -> tuple[str | None, bool]:
    """Which platform the template's cue names, and whether it says 微信号/WeChat
    ID outright. A QQ cue wins ("QQ/微信同号" is a QQ number used for both)."""
    low = template.lower()
    if "qq" in low or "扣扣" in template:
        return "qq", False
    explicit = "微信号" in template or "wechat id" in low
    if any(cue in low for cue in ("微信", "wechat", "wx", "vx", "v信", "威信")):
        return "wechat", explicit
    return None, explicit


def _fill(template: str, types: tuple[str, ...], v: Values, neg: Negatives, rng: random.Random) -> dict:
    spans: list[dict] = []
    negatives: list[str] = []
    values: dict[str, str] = {}
    for key in types:
        if key == "im_account":
            values[key] = v.im_account(*_im_cue(template))
        else:
            values[key] = getattr(v, key)()
    extra = {
        "order": str(rng.randint(1, 9)) + v.digits(11),
        "order_luhn": neg.order_luhn(),
        "order_id": neg.order_id_checksum(),
        "date": f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
        "tracking": rng.choice(("SF", "YT", "JT")) + v.digits(13),
        "price": f"¥{rng.randint(9, 9999)}.00",
        "sku": f"A{v.digits(7)}",
    }
    for key, value in extra.items():
        if "{" + key + "}" in template:
            values[key] = value
            negatives.append(value)
    # Rarely split a phone number with a zero-width space: clean_text must
    # remove it before masking.
    if "mobile" in values and rng.random() < 0.03:
        m = values["mobile"]
        values["mobile"] = m[:5] + "\u200b" + m[5:]
    text = rng.choice(PREFIXES) + template.format(**values) + rng.choice(SUFFIXES) + rng.choice(NOISE)
    for key in types:
        spans.append({"type": "name" if key == "english_name" else key, "value": values[key]})
    return {"text": text, "spans": spans, "negatives": negatives}


def generate(seed: int = SEED, size: int = SIZE) -> list[dict]:
    """Return ``size`` labelled records; the same seed gives the same set."""
    rng = random.Random(seed)
    v = Values(rng)
    neg = Negatives(rng, v)
    records: list[dict] = []
    while len(records) < size:
        roll = rng.random()
        if roll < 0.62:
            template, types = rng.choice(TEMPLATES)
            record = _fill(template, types, v, neg, rng)
        elif roll < 0.75:
            template, types = rng.choice(MIXED_TEMPLATES)
            record = _fill(template, types, v, neg, rng)
        else:
            text, negatives = neg.sentence()
            text = rng.choice(PREFIXES) + text + rng.choice(SUFFIXES) + rng.choice(NOISE)
            record = {"text": text, "spans": [], "negatives": negatives}
        records.append(record)
    return records


def main() -> None:
    seed = int(sys.argv[1]) if len(sys.argv) > 1 else SEED
    records = generate(seed)
    OUTPUT.parent.mkdir(parents=True, exist_ok=True)
    with OUTPUT.open("w", encoding="utf-8") as f:
        for record in records:
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
    print(f"wrote {len(records)} records to {OUTPUT}")


if __name__ == "__main__":
    main()
