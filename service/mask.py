"""Chinese PII masking for cleaned customer-service chat text.

``mask_text`` replaces personal data with typed placeholders (``[手机号]``,
``[身份证号]`` ...) and reports how many of each it replaced.  It expects text
that went through :func:`service.clean.clean_text` (half-width digits, one
line), but never raises on any ``str``.

Design notes
------------
* Digit strings are *classified*, not erased.  Order numbers, prices, dates,
  SKUs and tracking numbers are business data the summary needs, so a number
  is masked only when its shape *and* its checksum (ID card: ISO 7064
  MOD 11-2 + birth date; bank card: Luhn) say it is personal data, and it is
  left alone when it is directly introduced by a business cue such as
  ``订单号`` or ``快递单号`` (an order number may pass Luhn by chance).
* Python's ``\\b`` sees no boundary between a CJK character and a digit
  (both are ``\\w``), so every pattern uses explicit ASCII look-arounds.
* Passes run in a fixed order: e-mail first (``13812345678@163.com`` is an
  address, not a phone), then passports, the checksummed numbers and phones,
  and last the context-driven street-address and name rules, which stop at
  placeholders already inserted.
* Placeholders already in the text (``[手机号]``, ``[图片]`` ...) are never
  matched again and are not counted.
* Masking is idempotent (``mask_text(mask_text(x).text).text`` equals
  ``mask_text(x).text``; property-tested): a pattern that refuses to match
  when glued to an ASCII letter or digit is never allowed to end next to
  one either, so a placeholder cannot open a boundary that only a second
  call would see, and the context-driven passes run last, on final text.
"""

from __future__ import annotations

import io
import re
import sys
from dataclasses import dataclass
from datetime import date
from typing import Callable

from service.clean import clean_text

__all__ = ["PII_TYPES", "PLACEHOLDERS", "Masked", "mask_text", "main"]

PII_TYPES: tuple[str, ...] = (
    "mobile",
    "landline",
    "id_card",
    "bank_card",
    "email",
    "address",
    "name",
    "passport",
    "im_account",
)

PLACEHOLDERS: dict[str, str] = {
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


@dataclass(frozen=True)
class Masked:
    """Result of :func:`mask_text`.

    ``counts`` maps a key of :data:`PII_TYPES` to the number of values this
    call replaced; types with no replacement are absent.
    """

    text: str
    counts: dict[str, int]


# ---------------------------------------------------------------------------
# Shared building blocks
# ---------------------------------------------------------------------------

# ASCII-only boundaries: a digit run glued to letters or digits is part of a
# longer code (SF1234567890123, A13812345678) and must not be split.
_NB = r"(?<![0-9A-Za-z])"
_NA = r"(?![0-9A-Za-z])"

# A business cue right before a number ("订单号：", "快递单号是", "SKU#")
# marks it as an identifier the summary needs, even if it passes a checksum.
_BUSINESS_CUE = re.compile(
    r"(?:(?:订单|商品|快递|物流|运单|工单|售后|退款|批次)编号|订单号码|订单号|订单|单号|运单号|运单"
    r"|快递单号|快递号|物流单号"
    r"|物流号|货号|商品编号|商品号|商品ID|商品id|SKU|sku|流水号|交易号|交易单号|退款单号"
    r"|售后单号|工单号|批次号|发票号|会员号|券码|兑换码|(?i:order|tracking|invoice))"
    r"\s*(?:(?i:no\.?|number|id|num))?\s*(?:号码)?\s*(?:[:：#]|是|为)?\s*$"
)
_CUE_WINDOW = 24


def _business_cued(text: str, start: int) -> bool:
    return _BUSINESS_CUE.search(text, max(0, start - _CUE_WINDOW), start) is not None


def _digits(value: str) -> str:
    return "".join(ch for ch in value if "0" <= ch <= "9" or ch in "Xx")


def _luhn_ok(number: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(number)):
        d = ord(ch) - 48
        if i % 2:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


# First two digits of a resident ID: province-level division codes.
_ID_PROVINCES = frozenset(
    "11 12 13 14 15 21 22 23 31 32 33 34 35 36 37 41 42 43 44 45 46 "
    "50 51 52 53 54 61 62 63 64 65 71 81 82 83 91".split()
)
_ID_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
_ID_CHECK = "10X98765432"
# Birth dates after today are impossible; computed once so the hot path stays
# cheap (a process outliving a New Year's Eve is off by one year at worst).
_MAX_BIRTH_YEAR = date.today().year


def _valid_date(year: int, month: int, day: int) -> bool:
    if not (1900 <= year <= _MAX_BIRTH_YEAR and 1 <= month <= 12 and day >= 1):
        return False
    if month == 2:
        leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
        return day <= (29 if leap else 28)
    return day <= (30 if month in (4, 6, 9, 11) else 31)


def id_card_valid(number: str) -> bool:
    """True for a well-formed 18-digit (checksummed) or 15-digit resident ID."""
    if len(number) == 18:
        if number[:2] not in _ID_PROVINCES or not number[:17].isdigit():
            return False
        total = sum(int(number[i]) * _ID_WEIGHTS[i] for i in range(17))
        if _ID_CHECK[total % 11] != number[17].upper():
            return False
        return _valid_date(int(number[6:10]), int(number[10:12]), int(number[12:14]))
    if len(number) == 15 and number.isdigit():
        if number[:2] not in _ID_PROVINCES:
            return False
        return _valid_date(1900 + int(number[6:8]), int(number[8:10]), int(number[10:12]))
    return False


# ---------------------------------------------------------------------------
# Patterns
# ---------------------------------------------------------------------------

_EMAIL = re.compile(
    r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9][A-Za-z0-9._%+-]{0,63}"
    r"@[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63}){0,8}\.[A-Za-z]{2,24}"
    r"(?![A-Za-z0-9-])"
)

_PASSPORT_CUE = re.compile(r"(?i:passport)")
_PASSPORT = re.compile(
    _NB + r"(?:[EeGgPpSsDd][0-9]{8}|[Ee][A-HJ-NP-Za-hj-np-z][0-9]{7}"
    r"|(?:[SsDdPp][Ee])[0-9]{7})" + _NA
)

# Most patterns below start with a character class and put the "not glued to
# a longer code" look-behind *after* it ("1(?<![0-9A-Za-z]1)"): re can then
# skip ahead to candidate characters instead of trying the look-behind at
# every position, which makes these passes about twice as fast.

# Long digit strings: resident IDs (18 digits, optionally written 6-8-4, or
# the old 15-digit form) and bank cards (16-19 digits, plain or grouped by
# four).  One pass; the classifier decides with checksums and context.
_DATE = r"(?:0[1-9]|1[0-2])(?:0[1-9]|[12][0-9]|3[01])"
_LONG_NUMBER = re.compile(
    r"[0-9](?<![0-9A-Za-z][0-9])(?:"
    r"(?P<id18>[0-9]{5} ?(?:18|19|20)[0-9]{2}" + _DATE + r" ?[0-9]{3}[0-9Xx])"
    r"|(?P<id15>[0-9]{7}" + _DATE + r"[0-9]{3})"
    r"|[0-9]{15,18}"
    r"|[0-9]{3}(?:[ -][0-9]{4}){3}(?:[ -]?[0-9]{1,3})?"
    r")" + _NA
)

# Mainland mobiles (1[3-9]X XXXX XXXX, optional +86/0086/(+86)) and
# landlines (area code 010, 02X or 0XXX; 7-8 digit local number; optional
# extension).  The area-code alternatives are exact so that "075588886666"
# can only split as 0755 + 88886666.
_MOBILE_REST = r"[3-9][0-9](?:[ -]?[0-9]{4}){2}"
_AREA_REST = r"(?:10|2[0-9]|[3-9][0-9]{2})"
_LOCAL = (
    r"[1-9][0-9]{2,3}[ -]?[0-9]{4}"
    r"(?:(?: ?(?:-|转|分机|(?i:ext)\.?) ?)[0-9]{1,5})?"
)
_PHONE = re.compile(
    r"(?:(?P<mobile>"
    # "+" is a separator of its own, so "+86…" needs no look-behind (and
    # must not get one: "13812345678+8613912345678" would then only be
    # fully masked on a second call).
    # "86" alone, as people type it without the "+": an IMEI that starts
    # with 86 is 15 digits and fails the end boundary.
    r"(?:\+86[ -]?|0(?<![0-9A-Za-z]0)086[ -]?|8(?<![0-9A-Za-z]8)6[ -]?|[(（]\+?86[)）] ?)1" + _MOBILE_REST
    + r"|1(?<![0-9A-Za-z]1)" + _MOBILE_REST
    + r")|(?P<landline>"
    r"[(（] ?0" + _AREA_REST + r" ?[)）] ?-? ?" + _LOCAL
    + r"|0(?<![0-9A-Za-z]0)" + _AREA_REST + r"(?: ?- ?| )?" + _LOCAL
    + r"))" + _NA
)

# A mobile spelled in Chinese numerals, as customers write it to get past
# chat filters ("一三八 一二三四 五六七八", 幺 for one): eleven numerals in a
# row occur in no ordinary sentence.
_CN_NUMERALS = "零〇一二三四五六七八九幺两"
_CN_MOBILE = re.compile(
    r"[一幺](?<![" + _CN_NUMERALS + r"][一幺])[三四五六七八九](?:[ -]?[零〇一二三四五六七八九幺]){9}"
    r"(?![" + _CN_NUMERALS + r"])"
)

# Quick test for "is there anything that could be a phone, ID or card":
# every one of them contains three digits followed by at least four more
# digits, spaces or dashes.  Chat lines without one skip the number passes.
_NUMBER_HINT = re.compile(r"[0-9]{3}[0-9 -]{3,}[0-9]")

# --- instant-messaging accounts ------------------------------------------

# A WeChat or QQ id is personal data where the chat says it is one, and chats
# say it in several ways: after a cue ("加我微信：lily_2020", "QQ号12345678",
# "QQ/微信同号：…", "急事QQ找我…", "my wechat is …"), a few words after one
# ("能加个微信吗？我的是…"), or before one ("lily_2020 这是我微信").  After a
# bare WeChat cue an ordinary word may follow ("微信 payment"), so the id must
# then look like one (a digit, "_" or "-" in it).  WeChat's generated ids
# ("wxid_…") need no cue.  Phone numbers and e-mail addresses used as ids are
# masked as such before this pass.
_IM_CUES = ("信", "扣扣", "vx", "wx", "qq", "wechat")  # lower-cased; 信: 微信 威信 薇信 v信
_IM_CUE = r"(?:微信|威信|薇信|扣扣|(?<![A-Za-z0-9_-])(?i:v信|vx|wx|wechat|qq))"


def _im_id(digits_after_cue: bool = False) -> str:
    """An id that is never a piece of a longer ASCII run, on either side, so that masking
    cannot shorten a run into one that matches on a second call. Digits may follow a latin
    cue's letters directly ("QQ12345678") where the cue comes first."""
    left = r"(?<![A-Za-z0-9_-])"
    digits_left = r"(?:" + left + r"|(?<=[Qq][Qq])|(?<=[VvWw][Xx]))" if digits_after_cue else left
    return (
        r"(?P<account>" + left + r"[A-Za-z][-_A-Za-z0-9]{5,19}|" + digits_left + r"[1-9][0-9]{4,11})"
        r"(?![-_A-Za-z0-9])"
    )


_WXID = re.compile(r"(?<![A-Za-z0-9_-])wxid_[A-Za-z0-9_-]{4,}")
_IM_AFTER_CUE = re.compile(
    r"(?P<cue>" + _IM_CUE + r"(?:\s*[/、和或]\s*" + _IM_CUE + r")*)"
    r"(?P<explicit>同号|号码|号|账号|(?i: ?id))?"
    r"\s*(?:[:：])?\s*(?:是|为|叫|找我|加我|联系我|搜)?\s*(?:[:：])?\s*" + _im_id(digits_after_cue=True)
)
_IM_ENGLISH = re.compile(r"(?<![A-Za-z])(?i:my\s+(?:wechat|qq)(?:\s+id)?\s+is)\s+" + _im_id())
# "能加个微信吗？我的是…": the cue, then a few words without digits or letters.
_IM_MINE = re.compile(_IM_CUE + r"[^A-Za-z0-9\[\]\n]{0,10}?(?:我的|我)(?:号)?是\s*(?:[:：])?\s*" + _im_id())
# The cue is looked ahead at, not consumed: it may end where the next id starts.
_IM_BEFORE_CUE = re.compile(_im_id() + r"(?=\s*[,，]?\s*(?:这|这个)?(?:就)?是我(?:的)?" + _IM_CUE + r")")

# --- names ---------------------------------------------------------------

# Common single-character surnames (about 400, covering the great majority of
# people) and the compound ones.  Requiring a known surname is what keeps "我是客户" or
# "联系人填错了" from being masked.
_SURNAMES_1 = frozenset(
    "王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗郑梁谢宋唐许韩冯邓曹彭曾肖田董袁潘"
    "于蒋蔡余杜叶程苏魏吕丁任沈姚卢姜崔钟谭陆汪范金石廖贾夏韦付方白邹孟熊秦邱江"
    "尹薛闫段雷侯龙史陶黎贺顾毛郝龚邵万钱严覃武戴莫孔向汤常温康施文牛樊葛邢安齐"
    "易乔伍庞颜倪庄聂章鲁岳翟殷詹申欧耿关兰焦俞左柳甘祝包宁尚符舒阮柯纪梅童凌毕"
    "单季裴霍涂成苗谷盛曲翁冉骆蓝路游辛靳管柴蒙鲍华喻祁蒲房滕屈饶解牟艾尤阳时穆"
    "农司卓古吉缪简车项连芦麦褚娄窦戚岑景党宫费卜冷晏席卫米柏宗瞿桂全佟应臧闵苟"
    "邬边卞姬师和仇栾隋商刁沙荣巫寇桑郎甄丛仲虞敖巩明佘池查麻苑迟邝官封谈匡鞠惠"
    "荆乐冀郁胥南班储原栗燕楚鄢劳谌奚皮粟冼蔺楼盘满闻位厉伊仝区郜海阚花权强帅屠"
    "豆朴盖练廉禹井祖漆巴丰支卿国狄平计索宣晋相初门云容敬来扈晁芮都普阙浦戈伏鹿"
    "薄邸雍辜羊乌母裘亓修邰赫杭况那宿鲜印逯隆茹诸战慕危玉银亢嵇公哈湛宾戎勾茅利"
    "於呼居揭干但尉冶斯元束檀衣信展阴昝智幸奉植衡富尧闭由"
)
_SURNAMES_2 = (
    "欧阳|司马|诸葛|上官|东方|慕容|令狐|皇甫|尉迟|公孙|长孙|宇文|夏侯|司徒|端木"
    "|独孤|南宫|西门|万俟|闻人|轩辕|呼延|澹台|公羊|赫连|申屠|太史|钟离|第五"
)
# Characters that end a name: function words, verbs and nouns that typically
# follow a name in chat ("我叫张三想问一下", "联系人王芳电话…").  Characters
# common in given names (家 可 成 国 文 学 …) are deliberately absent.
_NAME_STOP = (
    "的了是在我你他她它们想要问下说请帮跟把给吧呢啊吗嘛呀哦哈就还也都已经没不有这那个"
    "电话手机号码微信地址住收寄发送件货人订单快递麻烦您好身份证卡护照邮箱联系"
    "先女士姐老师傅经理总同阿姨客户会员用买家卖店到去来从往过着对错改换填写姓"
)
_NAME_CHAR = r"(?:(?![" + _NAME_STOP + r"])[\u4e00-\u9fff])"
# Province / big-city names: one right after a name ends it ("收货人李明北京市…"),
# and without a strong cue a "name" starting with one is a place ("我是江苏的");
# after "收货人" it is a person (沈阳兰).
_PLACES = (
    "北京|天津|上海|重庆|河北|山西|辽宁|吉林|黑龙江|江苏|浙江|安徽|福建|江西|山东|河南"
    "|湖北|湖南|广东|海南|四川|贵州|云南|陕西|甘肃|青海|台湾|内蒙古|广西|西藏|宁夏|新疆"
    "|香港|澳门|深圳|广州|杭州|南京|武汉|成都|西安|苏州|厦门|青岛|大连|宁波|长沙|郑州"
    "|沈阳|济南|合肥|福州|昆明|南宁|哈尔滨|长春|石家庄|太原|南昌|贵阳|兰州|乌鲁木齐"
)
_NAME_BODY = (
    r"(?P<name>(?:(?:" + _SURNAMES_2 + r")|" + _NAME_CHAR + r")"
    r"(?:(?!(?:" + _PLACES + r"))" + _NAME_CHAR + r"){1,2})"
)
# Strong cues introduce a name by definition; weak ones ("我是", "本人") also
# introduce roles ("我是客户", "本人已收到"), so their names need a known
# surname and a clean end.
_NAME_CUE = re.compile(
    r"(?:(?P<strong>我叫|我的名字叫|我的名字是|名字叫|名字是|姓名|收件人|收货人|联系人"
    r"|寄件人|持卡人|开户名|户名|开户人|收款人|付款人|账户名|退款账户|签收人|取件人|下单人"
    # A relative or friend introduced by name ("我朋友叫沈浩", "我老公是王强").
    r"|(?:朋友|老公|老婆|爱人|对象|同事|室友|儿子|女儿|爸爸|妈妈|我爸|我妈)(?:叫|是))"
    r"|(?P<weak>我是|本人|我这边是|这里是))"
    r"\s*(?:[:：])?\s*(?:是|为|叫|改成|改为|换成|写成|写的是|填的是|写的|填的|写|填)?\s*(?:[:：])?\s*"
    + _NAME_BODY
)
_NAME_TITLES = ("先生", "女士", "小姐", "老师", "师傅", "经理", "同学", "阿姨", "总")
# Surname-initial words that follow a cue but start no name ("收件人是公司前台",
# "我是华为用户"); a candidate starting with one is refused.
_NOT_NAMES = frozenset(
    "谢谢 黄金 白金 高级 普通 正式 常客 包邮 周末 明天 白天 晚上 江湖 安心 余额 方便 全部 "
    "平时 时间 马上 尽快 单位 公司 家里 宿舍 工作 上班 周一 周二 周三 周四 周五 周六 周日 "
    "华为 海尔 格力 安踏 方太 同上".split()
)
# After "我是<name>" only these may follow directly; anything else means the
# "name" was the start of a longer word ("我是周末下单", "我是黄金会员").
_WEAK_FOLLOW = frozenset("想要我啊呀呢哦啦嘛请麻问电手刚，,。.!！?？ ")
_PLACE_START = re.compile(r"(?:" + _PLACES + r")")
# A name pasted right before a phone number, the usual shipping block
# ("张伟 [手机号] 北京市…", "…88号，张伟，[手机号]").  Phones are masked
# before names, so the phone is already a placeholder here.
_NAME_BEFORE_PHONE = re.compile(
    r"(?<![\u4e00-\u9fffA-Za-z0-9])" + _NAME_BODY
    + r"(?=[\s,，]?"
    # The block may give an IM account between the name and the phone.
    + r"(?:(?:" + _IM_CUE + r")(?:号)?[:：]?\s*\[社交账号\][\s,，]?)?"
    + r"(?:(?:电话|手机|手机号|联系方式|tel)[:：]?\s*)?(?:\[手机号\]|\[固话\]))"
)
_ENGLISH_NAME = re.compile(
    r"(?<![A-Za-z])(?i:my\s+name\s+is|my\s+name's|full\s+name\s*[:：]|name\s*[:：])\s*"
    r"(?P<name>[A-Z][a-z]{1,20}(?:[ -][A-Z][a-z]{1,20}){0,2})" + _NA
)

# --- addresses -----------------------------------------------------------

# Characters that cannot be part of an address and stop the expansion to the
# left of an address core ("请送到" / "我住在" / "地址是" …).  Only function
# words: characters that occur in place names (成都, 历下区, 发展大道,
# 机场路, 从化区) must not be here.
_ADDR_STOP = frozenset("的了是在我你他她们想要问说请帮跟把给吧呢啊吗嘛呀哦就还也已没不这那个到去住送寄往址改换填写麻烦谢您好")
_ADDR_CHAR = r"(?:(?![" + "".join(sorted(_ADDR_STOP)) + r"])[A-Za-z\u4e00-\u9fff])"
# Numbered road / lane: the backbone of a street address.
_ADDR_CORE = re.compile(
    r"(?:路|街|大街|大道|巷|胡同|弄)[0-9]{1,5}(?:[-之][0-9]{1,4})?(?:号院|号|弄|巷)"
    # Weaker cores ("南京道5号", "王庄村3组", "望京花园3号楼") are accepted
    # only with an admin unit or a community name to their left.
    r"|(?P<weak>(?:道|里)[0-9]{1,5}号|村[0-9]{1,3}组|[0-9]{1,4}(?:号楼|栋|幢|座))"
    # A rural address has no number: county, town and village in a row
    # ("临泉县杨桥镇刘庄村") is specific enough on its own.
    r"|(?:县|区|市|旗)" + _ADDR_CHAR + r"{1,8}?(?:镇|乡)" + _ADDR_CHAR + r"{1,8}?村"
    r"(?:[0-9]{1,3}组)?(?:[0-9]{1,4}号)?"
)
# Everything that can follow the number: community names, buildings, units,
# floors and rooms ("SOHO现代城2号楼1203室", "3栋2单元501").
_ADDR_TAIL = re.compile(
    r"(?:" + _ADDR_CHAR + r"{0,10}?"
    r"(?:[0-9]{1,5}|[A-Za-z])(?:号楼|号院|栋|幢|座|单元|层|楼|室|号|户|房|弄|组))+"
    # A bare room number after a building or unit ("2单元801").
    r"(?:(?<=[元栋幢楼座层])[0-9]{2,5}" + _NA + r")?"
)
_ADMIN = re.compile(r"省|自治区|市|区|县|旗|镇|乡|街道|村")
_ROAD = re.compile(r"路|街|大道|巷|胡同|弄")
_COMMUNITY = re.compile(r"小区|花园|苑|园|大厦|公寓|广场|中心|城|府|湾|庭|宿舍")
_NUMBERED = re.compile(r"[0-9A-Za-z](?:号楼|号院|号|室|栋|幢|座|单元|层|楼|组|弄)")
_ADDR_CUE = re.compile(
    r"(?:收货地址|收件地址|送货地址|配送地址|邮寄地址|详细地址|家庭地址|公司地址|现住址|住址|地址"
    r"|寄到|送到|发到|邮寄到|邮到|寄往|送至|寄至|发往|派送到|住在)"
    r"\s*(?:[:：])?\s*(?:是|为|在|改成|改为|换成|写的是)?\s*(?:[:：])?\s*"
    r"(?P<body>[A-Za-z0-9\u4e00-\u9fff#()（）-]+(?: [A-Za-z0-9\u4e00-\u9fff#()（）-]+){0,4})"
)
# An address body ends with a component suffix or a number; trailing chat
# ("…88号谢谢") is cut back to it.
_ADDR_END = re.compile(
    r".*(?:号楼|号院|号|室|楼|栋|幢|座|单元|层|弄|村|组|省|市|区|县|旗|镇|乡|街道|路|街|大道"
    r"|巷|胡同|小区|花园|苑|园|大厦|广场|中心|公寓|城|院|屯|庄|府|湾|宿舍|[0-9])"
)
_MAX_LEFT = 24


# ---------------------------------------------------------------------------
# Passes
# ---------------------------------------------------------------------------

Classifier = Callable[[re.Match[str]], "str | None"]


def _sub(
    pattern: re.Pattern[str],
    text: str,
    classify: Classifier,
    counts: dict[str, int],
    group: int | str = 0,
) -> str:
    """Replace ``group`` of every match that ``classify`` assigns a type to."""
    pieces: list[str] = []
    last = 0
    for match in pattern.finditer(text):
        kind = classify(match)
        if kind is None:
            continue
        start, end = match.span(group)
        pieces.append(text[last:start])
        pieces.append(PLACEHOLDERS[kind])
        counts[kind] = counts.get(kind, 0) + 1
        last = end
    if not pieces:
        return text
    pieces.append(text[last:])
    return "".join(pieces)


def _mask_email(text: str, counts: dict[str, int]) -> str:
    if "@" not in text:
        return text
    return _sub(_EMAIL, text, lambda m: "email", counts)


def _mask_passport(text: str, counts: dict[str, int]) -> str:
    # The cue is looked for in the whole message rather than a window: masking
    # shortens the text, and a window could then reach a cue on a second pass.
    if "护照" not in text and _PASSPORT_CUE.search(text) is None:
        return text
    return _sub(_PASSPORT, text, lambda m: "passport", counts)


def _classify_long_number(match: re.Match[str]) -> str | None:
    if _business_cued(match.string, match.start()):
        return None
    raw = match.group()
    number = _digits(raw)
    if (match.group("id18") or match.group("id15")) and id_card_valid(number):
        return "id_card"
    # No card number starts with 0 (issuer identification numbers don't),
    # while "0451 7060 3560-6090" is a landline with an extension that
    # happens to pass Luhn.
    if 16 <= len(number) <= 19 and number.isdigit() and number[0] != "0" and _luhn_ok(number):
        # A grouped 6-8-4 ID candidate that failed its checksum is no card.
        if " " in raw and not _CARD_GROUPING.fullmatch(raw):
            return None
        return "bank_card"
    return None


_CARD_GROUPING = re.compile(r"[0-9]{4}(?:[ -][0-9]{4}){3}(?:[ -]?[0-9]{1,3})?")


def _mask_numbers(text: str, counts: dict[str, int]) -> str:
    text = _sub(_LONG_NUMBER, text, _classify_long_number, counts)
    return _sub(_PHONE, text, _classify_phone, counts)


def _classify_phone(match: re.Match[str]) -> str | None:
    if _business_cued(match.string, match.start()):
        return None
    return "mobile" if match.group("mobile") else "landline"


def _mask_chinese_numeral_mobiles(text: str, counts: dict[str, int]) -> str:
    if "一" not in text and "幺" not in text:
        return text
    return _sub(_CN_MOBILE, text, lambda m: "mobile", counts)


def _classify_im_account(match: re.Match[str]) -> str | None:
    account = match.group("account")
    if _business_cued(match.string, match.start("account")):
        return None
    cue = match.groupdict().get("cue")  # only after a cue can a plain word follow the cue
    if cue is not None and not match.group("explicit") and "q" not in cue.lower() and "扣" not in cue:
        if account[0].isalpha() and not any(ch.isdigit() or ch in "_-" for ch in account):
            return None
    return "im_account"


def _mask_im_accounts(text: str, counts: dict[str, int]) -> str:
    lowered = text.lower()  # substring tests: a tenth of a regex search on every message
    if not any(cue in lowered for cue in _IM_CUES):
        return text
    text = _sub(_WXID, text, lambda m: "im_account", counts)
    for pattern in (_IM_AFTER_CUE, _IM_ENGLISH, _IM_MINE, _IM_BEFORE_CUE):
        text = _sub(pattern, text, _classify_im_account, counts, group="account")
    return text


def _strip_title(name: str) -> str:
    for title in _NAME_TITLES:
        if name.endswith(title):
            return name[: -len(title)]
    return name


def _classify_bare_name(match: re.Match[str]) -> str | None:
    name = match.group("name")
    if name[:2] in _NOT_NAMES or not (name[0] in _SURNAMES_1 or name[:2] in _SURNAMES_2):
        return None
    if _PLACE_START.match(name):  # "深圳 0755-…" is a city before a phone
        return None
    return "name"


def _mask_names(text: str, counts: dict[str, int]) -> str:
    def classify(match: re.Match[str]) -> str | None:
        name = match.group("name")
        if name[:2] in _NOT_NAMES or len(_strip_title(name)) != len(name):
            return None
        has_surname = name[0] in _SURNAMES_1 or name[:2] in _SURNAMES_2
        end = match.end("name")
        nxt = match.string[end : end + 1]
        if match.group("weak") is not None:
            if not has_surname or _PLACE_START.match(name):
                return None
            if nxt and nxt not in _WEAK_FOLLOW and nxt != "[" and _PLACE_START.match(match.string, end) is None:
                return None
        elif not has_surname:
            # Even after a strong cue an unknown first character is more
            # often a word than a rare surname ("户名一致", "联系人填错了").
            return None
        return "name"

    text = _sub(_NAME_CUE, text, classify, counts, group="name")
    if "[手机号]" in text or "[固话]" in text:
        text = _sub(_NAME_BEFORE_PHONE, text, _classify_bare_name, counts, group="name")
    if "name" in text or "Name" in text or "NAME" in text:
        text = _sub(_ENGLISH_NAME, text, lambda m: "name", counts, group="name")
    return text


def _address_ok(address: str) -> bool:
    """Is a cued text specific enough to be a street address?

    "送到3号楼" or "地址：公司楼下" name no place; an address has two kinds
    of component (admin unit, road, community, numbered unit) or at least
    two admin units ("浙江省杭州市西湖区").
    """
    if len(address) < 4:
        return False
    admin = len(_ADMIN.findall(address))
    kinds = (
        (admin > 0)
        + (_ROAD.search(address) is not None)
        + (_COMMUNITY.search(address) is not None)
        + (_NUMBERED.search(address) is not None)
    )
    return kinds >= 2 or admin >= 2


def _left_edge(text: str, start: int, floor: int) -> int:
    """Extend an address to the left over place-name characters."""
    i = start
    while i > floor and start - i < _MAX_LEFT:
        ch = text[i - 1]
        # CJK only: swallowing ASCII letters could leave a number that was
        # glued to them ("13812345678abc建国路…") free to match next time.
        if ch in _ADDR_STOP or not "\u4e00" <= ch <= "\u9fff":
            break
        i -= 1
    # Chat before the address ("帮我改成北京市…"): start at a province or
    # big-city name, but only one that heads admin units ("南京西路" is a
    # road name, not the start of the address).
    for place in _PLACE_START.finditer(text, i, start):
        if _ADMIN.search(text, place.end(), start):
            return place.start()
    return i


def _mask_addresses(text: str, counts: dict[str, int]) -> str:
    pieces: list[str] = []
    last = 0
    # Cued addresses: "地址：…", "寄到…".  Searching resumes where the
    # accepted address ends, not where the greedy body ended, so a second cue
    # inside the cut-off chat ("…88号地址：…") is still seen.
    pos = 0
    while (match := _ADDR_CUE.search(text, pos)) is not None:
        body_start = match.start("body")
        trimmed = _ADDR_END.match(text, body_start, match.end("body"))
        if trimmed is None or not _address_ok(trimmed.group()):
            pos = match.start() + 1
            continue
        pieces.append(text[last:body_start])
        pieces.append(PLACEHOLDERS["address"])
        counts["address"] = counts.get("address", 0) + 1
        last = pos = trimmed.end()
    if pieces:
        pieces.append(text[last:])
        text = "".join(pieces)

    # Uncued addresses, found from their numbered core outwards.
    pieces = []
    last = 0
    pos = 0
    while True:
        core = _ADDR_CORE.search(text, pos)
        if core is None:
            break
        pos = core.end()
        start = _left_edge(text, core.start(), last)
        if start == core.start():
            continue  # "路3号" with no road name is not an address
        end = core.end()
        tail = _ADDR_TAIL.match(text, end)
        if tail is not None:
            end = tail.end()
        left = text[start : core.start()]
        if core.group("weak") is not None and not (
            _ADMIN.search(left) or _COMMUNITY.search(left)
        ):
            continue
        pieces.append(text[last:start])
        pieces.append(PLACEHOLDERS["address"])
        counts["address"] = counts.get("address", 0) + 1
        last = pos = end
    if pieces:
        pieces.append(text[last:])
        text = "".join(pieces)
    return text


# ---------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------


def mask_text(text: str) -> Masked:
    """Replace personal data in cleaned chat ``text`` by typed placeholders.

    >>> m = mask_text("我叫张伟，手机13812345678，订单号202611031234")
    >>> m.text
    '我叫[姓名]，手机[手机号]，订单号202611031234'
    >>> m.counts
    {'mobile': 1, 'name': 1}
    """
    counts: dict[str, int] = {}
    if not text:
        return Masked(text="", counts=counts)
    text = _mask_email(text, counts)
    text = _mask_passport(text, counts)
    if _NUMBER_HINT.search(text) is not None:
        text = _mask_numbers(text, counts)
    text = _mask_chinese_numeral_mobiles(text, counts)
    text = _mask_im_accounts(text, counts)
    # Addresses before names: a name rule looks at what follows the name,
    # and that must already be final, or a second call could decide
    # differently (masking must be idempotent).
    text = _mask_addresses(text, counts)
    text = _mask_names(text, counts)
    return Masked(text=text, counts={k: counts[k] for k in PII_TYPES if k in counts})


def main() -> None:
    """Read lines from stdin, write them cleaned and masked to stdout."""
    # Chat exports are not always valid UTF-8; a bad byte must not stop the
    # whole stream.
    raw = getattr(sys.stdin, "buffer", None)
    lines = io.TextIOWrapper(raw, encoding="utf-8", errors="replace") if raw else sys.stdin
    out = sys.stdout
    try:
        for line in lines:
            out.write(mask_text(clean_text(line)).text + "\n")
        out.flush()
    finally:
        if lines is not sys.stdin:
            lines.detach()  # leave sys.stdin's buffer open for the caller


if __name__ == "__main__":
    main()
