"""Pattern tables for the rule-based extractor (`memoryd.extraction.rules`).

Every pattern runs on one sentence that has already lost its trailing punctuation and its
leading filler words ("ok, ", "对了，"), so most are anchored at `^`. Named group `c`, when
present, is the part that becomes the memory; `t` is a time phrase moved after the subject.
Blocklists live in negative lookaheads: they are where most false positives ("I have a
question", "我有点累", "I love it") are stopped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from memoryd.extraction.first_chars import AnyOf
from memoryd.extraction.screens import Screened

Category = Literal["preference", "fact", "plan", "instruction"]
Kind = Literal["statement", "imperative", "time_led"]

_I = re.IGNORECASE


def _c(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, _I)


@dataclass(frozen=True)
class Rule:
    pattern: re.Pattern[str]
    category: Category
    kind: Kind


_DAYS = r"(?:mon|tues|wednes|thurs|fri|satur|sun)day"
EN_TIME = (
    rf"(?:tomorrow|tonight|later today|soon|on {_DAYS}s?"
    rf"|(?:this|next|coming) (?:week|weekend|month|year|time|evening|afternoon|morning"
    rf"|summer|winter|spring|fall|autumn|{_DAYS})"
    r"|in (?:a|one|two|three|four|five|a few|\d+) (?:days?|weeks?|months?|years?))"
)
ZH_TIME = (
    r"(?:大后天|后天|明天|明早|明晚|今晚|今天晚上|下周末|这周末|这个周末|周末"
    r"|(?:下个?|这个?|本)?(?:周|星期|礼拜)[一二三四五六日天]|下周|下星期|下礼拜"
    r"|下个月|下个星期|下个礼拜|明年|月底|年底|过几天|下次)"
)

# --- cleaning ---------------------------------------------------------------------------------

FILLERS = re.compile(
    r"^(?:(?:oh|ok|okay|so|well|also|and|but|btw|by the way|actually|honestly|hey|hi|hello"
    r"|yeah|yes|yep|no|nope|um+|uh+|hmm+|ah|anyway|anyways|fyi|just so you know|for the record"
    r"|for your information|thanks|thank you|great|cool|sure|alright|right|plus|besides"
    r"|basically)\b[\s,:;!.\-]*"
    r"|(?:嗯+|哦+|噢|喔|啊|呃|额|哈+|对了|另外|还有|顺便说一下|顺便说|顺便|其实|说实话|老实说"
    r"|好的|好吧|好(?=[，,！!。\s])|对(?=[，,！!。\s])|是的|没错|谢谢|那个|然后|而且|不过|但是"
    r"|所以|话说|你知道吗|告诉你)[\s,，:：;；!！.。~～、]*)+",
    _I,
)
# Punctuation stripped from either end of a sentence or memory, with whitespace: TRAILING
# and LEADING as patterns, *_MARKS as the characters `str.rstrip`/`str.lstrip` take.
TRAILING_MARKS = ".,!?;:。！？；：，、…~～-—_*\"'“”‘’)）"
LEADING_MARKS = ".,!?;:。！？；：，、…~～-—_*\"'“”‘’(（"
TRAILING = re.compile(rf"[\s{re.escape(TRAILING_MARKS)}]+$")
LEADING = re.compile(rf"^[\s{re.escape(LEADING_MARKS)}]+")
# Sentence ends (kept on the left part) and hard breaks; "." only before space or the end,
# so "3.5", "e.g" in words and URLs stay whole.
SENTENCE_SPLIT = re.compile(r"(?<=[。！？；;!?])|(?<=\.)(?=\s|$)|[\r\n]+")
# The lookahead names every character a split can start with, so the scan skips the others
# at once instead of trying each alternative at every position (4x faster on long text).
CLAUSE_SPLIT = re.compile(
    r"(?=[\s,，、但而所因并不可])"
    r"(?:\s*[,，、]\s*|\s+(?:and|but|so|because|since|although|though)\s+"
    r"|(?:但是|而且|所以|因为|并且|不过|可是))",
    _I,
)

# A request wrapper around an instruction or memory request: "could you please always ...".
REQUEST_PREFIX = _c(
    r"^(?:(?:can|could|would|will) you(?: please)?|i (?:want|need) you to|i'd like you to"
    r"|i would like you to|you should|you must|you need to"
    r"|(?:我希望你|希望你|我要你|我想让你|请你|麻烦你|你能不能|你可以))"
    r"\s*"
)

# A clause that asks the assistant for something: it ends what a sentence states about the
# user ("我对花生过敏,给我推荐点零食吧" keeps "我对花生过敏"). Tried on each clause after
# the first, after its fillers are cleaned.
REQUEST_CLAUSE = _c(
    r"^(?:please|pls|plz|can (?:you|u)|could you|would you|will you|help me|tell me|give me"
    r"|show me|find me|get me|send me|recommend|suggest|any (?:ideas|suggestions|tips|advice"
    r"|recommendations|thoughts)|what|what's|how|which|where|why|who|do you|does|should i"
    r"|is there|are there|let me know|i need (?:some )?(?:ideas|help|advice|tips|suggestions"
    r"|recommendations)|i want you|i'd like you|ideas for|tips for|write|make me|create"
    r"|list|draft)\b"
    r"|^(?:请|麻烦|帮我|帮忙|帮|给我|替我|为我|你(?:能|可以|帮|给|来|推荐|说说|觉得|看看)"
    r"|能(?:不能|否)?(?:帮|给|推荐)|可以(?:帮|给|推荐)|可不可以|推荐|告诉我|介绍|求推荐"
    r"|有(?:什么|没有|啥)|怎么|如何|该怎么|要怎么|来(?:点|个|一))"
)

# --- refusals -----------------------------------------------------------------------------

FORGET = _c(
    r"^(?:please\s+)?(?:forget|disregard|ignore|delete|erase)\b(?!\s+to\b)"
    r"|\b(?:don't|do not|dont|no need to|you don't need to|you do not need to|needn't"
    r"|stop|please stop)\s+(?:to\s+)?(?:remember(?:ing)?|sav(?:e|ing)|stor(?:e|ing)"
    r"|record(?:ing)?|memoriz(?:e|ing))\b"
    r"|(?:不用|不必|无需|不需要|别|不要|请勿|不许)再?(?:记住|记下|记录|记|保存|存)"
    r"|^(?:请)?(?:你)?(?:(?:忘掉|忘记|忘了)(?!说|告诉|讲|提)|删掉|删除)"
)
QUESTION = _c(
    r"^(?:do(?!\s+not\b)|does|did|can|could|would|will|should|shall|is|are|was|were|have|has|am"
    r"|what|what's|whats|who|whom|whose|where|when|why|how|which|whether)\b"
    r"|(?:吗|嘛|么|呢)$|什么|怎么|为什么|为啥|哪|谁|是否|是不是|有没有|能不能|可不可以|要不要"
    r"|会不会|对不对|好不好|行不行|多少|几点|几岁|几号"
)
HYPOTHETICAL = _c(
    r"^(?:if|suppose|supposing|imagine|assuming|hypothetically|what if|let's say|lets say"
    r"|in case|unless|pretend)\b"
    r"|\bif (?:i|i'm|i'd|i've|my)\b|\bi wish\b|\bwere i\b|\bi (?:would|could) have\b"
    r"|^(?:如果|假如|假设|要是|万一|倘若|假使|想象一下|设想|假定)|如果我|假如我|要是我|假设我|万一我|我希望我"
)
# QUESTION or HYPOTHETICAL anywhere, in one scan (`rules._doubtful`).
DOUBTFUL = _c(f"(?:{QUESTION.pattern})|(?:{HYPOTHETICAL.pattern})")

# The same searches, screened (shared/extraction/screens.py): the alternatives anchored at
# the start, and the words every English alternative inside needs (the others need Han).
_START_ONLY = re.compile(r"^\^")


def _starts(*patterns: re.Pattern[str]) -> re.Pattern[str]:
    """The `^` alternatives of `patterns`' top-level alternations, as one pattern."""
    bodies = [alt for p in patterns for alt in _top_level(p.pattern) if _START_ONLY.match(alt)]
    return _c("|".join(f"(?:{body})" for body in bodies) or r"(?!)")


def _top_level(pattern: str) -> list[str]:
    """`pattern` split at the `|` that are outside any group or class."""
    parts, depth, start, i, in_class = [], 0, 0, 0, False
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            i += 2
            continue
        if in_class:
            in_class = ch != "]"
        elif ch == "[":
            in_class = True
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "|" and depth == 0:
            parts.append(pattern[start:i])
            start = i + 1
        i += 1
    parts.append(pattern[start:])
    return parts


DOUBTFUL_SCAN = Screened(DOUBTFUL, _starts(QUESTION, HYPOTHETICAL),
                         ("if ", "i wish", "were i", "i would have", "i could have"))
FORGET_SCAN = Screened(FORGET, _starts(FORGET), ("remember", "sav", "stor", "record", "memoriz"))
# A remembered clause that is itself a question or indirect question: "remember what I said".
WH_CLAUSE = _c(r"^(?:what|where|when|which|who|how|why|if|whether)\b|什么|怎么|哪|谁")

# --- explicit memory requests -------------------------------------------------------------

EXPLICIT = (
    _c(r"^(?:please\s+)?(?:always\s+)?remember\b\s*(?:that\b|this\s*[:,\-]|[:,\-])?\s*(?P<c>.+)"),
    _c(
        r"^(?:please\s+)?(?:don't|do not|dont|never) forget\b\s*"
        r"(?:that\b|this\s*[:,\-]|[:,\-])?\s*(?P<c>.+)"
    ),
    _c(
        r"^(?:please\s+)?(?:note|take note|make a note|keep in mind|bear in mind)"
        r"(?:\s+that\b|\s*[:\-])\s*(?P<c>.+)"
    ),
    _c(r"^(?P<c>.+?)\s*[,，\-—]\s*(?:please\s+)?(?:remember|don't forget)(?: that| this)?$"),
    _c(
        r"^(?:请|麻烦)?你?(?:帮我|给我)?(?:记住|记一下|记下来|记下|记好|记着|记得|牢记)"
        r"(?:了|哦|啊|呀|吧)?\s*[：:，,\-]?\s*(?P<c>.+)"
    ),
    _c(r"^(?:请)?你?(?:别|不要|千万别|千万不要|可别)忘(?:了|记)?\s*[：:，,\-]?\s*(?P<c>.+)"),
    _c(
        r"^(?P<c>.+?)\s*[，,\-—]\s*(?:请|你)?要?(?:记住|记好|记下来|别忘了|不要忘了)"
        r"(?:了|哦|啊|呀|吧)?$"
    ),
)
REMEMBER_TO = _c(r"^to\s+(?P<c>.+)")

# --- rules, tried in order; the first match wins --------------------------------------------

_PREF_ADV = (
    r"(?:(?:really|also|absolutely|just|truly|totally|kind of|kinda|do|still|actually"
    r"|generally|usually|definitely|much|genuinely|seriously)\s+)*"
)
_PREF_OBJ = (
    r"(?!(?:it|that|this|these|those|them|you|your|yours|him|her|ya|when|how|what|if)\b)"
    r"(?!to (?:say|admit|tell|bother|ask|interrupt|hear|break)\b)"
)
_EN_NOT_CHAT = r"(?!(?:bit|little|lot|tad|few)\b)"
_HAVE_NOUNS = (
    r"(?!(?:(?:quick|few|small|simple|follow-up|follow up|silly|stupid|dumb|related|another"
    r"|other|new|short|general|final|last|couple(?: of)?)\s+)*(?:questions?|problems?|issues?"
    r"|ideas?|feelings?|favou?r|requests?|suggestions?|doubts?|quer(?:y|ies)|concerns?"
    r"|thoughts?|minutes?|seconds?|moments?|clue|way|point|look|bugs?|errors?"
    # What the user is working on right now, not who they are.
    r"|lot|bunch|list|lists|files?|functions?|scripts?|tables?|datasets?|arrays?|strings?"
    r"|dataframes?|class|classes|methods?|variables?|loops?|programs?|snippets?|piece of"
    r"|columns?|rows?|csv|json|spreadsheets?|documents?|texts?|paragraphs?|sentences?)\b)"
)
_MY_NOUNS = (
    r"(?!(?:question|problem|point|issue|answer|guess|bad|pleasure|god|goodness|bet|turn"
    r"|fault|concern|idea|thought|understanding|code|apologies|mistake|request|response"
    r"|message|prompt|output|input|error)\b)"
)
_PLAN_NOT = (
    r"(?!(?:(?:to|on)\s+)?(?:try|check|see|think|be back|be right back|brb|get back|let|wait"
    r"|look|have a look|do (?:it|that|this)|ask|tell|need|bed|sleep|grab"
    r"|take a (?:break|nap|look))\b)"
    r"(?!.*\byou(?:r|rs)?\b)"
)
_ZH_PREF_ADV = (r"(?:最近|现在|平时|从小|最|很|也|特别|非常|真的|还|一直|比较|超|挺|更|不太"
                r"|不是很|有点|都|本来就)*")
# Time and aspect words between 我 and the verb ("我最近在学", "我也养了"); at most four, so a
# run of them costs a bounded amount whatever the text (刚刚 is also 刚 twice).
_ZH_ADV = (r"(?:最近|这段时间|这几天|近来|现在|目前|正在|一直|已经|刚刚|刚|才|也|还|又|终于|今年"
           r"|去年|上个月|上周|前段时间|前几天|每天|平时|经常|开始|在){0,4}")
# English adverbs before a fact's verb ("I also have", "I just moved"): distinct words,
# each with its space, so the run is read once.
_EN_ADV = (r"(?:(?:just|also|recently|finally|now|still|currently|already|actually|even"
           r"|officially|newly|really)\s+)*")
_FAMILY_EN = (
    r"(?:wife|husband|partner|spouse|girlfriend|boyfriend|fianc[ée]e?|son|daughter|kids?"
    r"|children|child|baby|toddler|mom|mother|mum|dad|father|parents|brother|sister|siblings?"
    r"|grandma|grandmother|grandpa|grandfather|grandparents|aunt|uncle|cousin|nephew|niece"
    r"|family|cat|dog|puppy|kitten|pet|boss|roommate|best friend|twins?|in-laws"
    r"|mother-in-law|father-in-law)s?"
)
_FAMILY_ZH = (
    r"(?:老婆|老公|妻子|丈夫|爱人|太太|媳妇|女朋友|男朋友|对象|未婚妻|未婚夫|女儿|儿子|孩子|闺女"
    r"|宝宝|小孩|妈妈|妈|爸爸|爸|母亲|父亲|爸妈|父母|哥哥|姐姐|弟弟|妹妹|哥|姐|弟|妹|爷爷|奶奶"
    r"|外公|外婆|姥姥|姥爷|公公|婆婆|岳父|岳母|家人|猫咪|猫|狗狗|狗|宠物|老板|室友|闺蜜|好朋友)"
)
_ZH_PREF_OBJ = r"(?![你您它他她这那])"

RULES: tuple[Rule, ...] = (
    # Standing instructions to the assistant.
    Rule(
        _c(r"^(?:please\s+)?(?P<c>(?:always|never)\b(?!\s+mind\b)\s*\S.*)"),
        "instruction",
        "imperative",
    ),
    Rule(
        _c(
            r"^(?:please\s+)?(?P<c>(?:from now on|going forward|henceforth|from here on(?: out)?"
            r"|in (?:the )?future)\b[\s,:]*(?!(?:i|i'm|my)\b)\S.*)"
        ),
        "instruction",
        "imperative",
    ),
    Rule(
        _c(r"^.+\S\s*,?\s*(?:from now on|going forward|in (?:the )?future)$"),
        "instruction",
        "imperative",
    ),
    Rule(_c(r"^please\s+(?P<c>(?:don't|do not|never|stop)\s+\S.*)"), "instruction", "imperative"),
    Rule(
        _c(r"^(?:please\s+)?(?P<c>(?:call me|address me as|refer to me as)\s+\S.*)"),
        "instruction",
        "imperative",
    ),
    Rule(
        _c(
            r"^(?:请)?你?(?P<c>(?:以后(?!我|再说|再聊|见)|今后|从现在开始|从现在起|从今以后|往后"
            r"|总是|始终|永远|每次)\S.{2,})"
        ),
        "instruction",
        "imperative",
    ),
    Rule(
        _c(
            r"^(?:请)?你?(?P<c>(?:不要|别再|永远不要|千万不要|绝对不要|不许|禁止)(?![忘记紧])\S.{2,})"
        ),
        "instruction",
        "imperative",
    ),
    Rule(_c(r"^(?:请)?(?P<c>(?:叫我|称呼我|喊我)\s*\S.*)"), "instruction", "imperative"),
    # Plans.
    Rule(
        _c(rf"^(?P<t>{EN_TIME})\s*,?\s+(?P<c>i(?:'m|'ll|'ve)?\s+{_PLAN_NOT}.+)"), "plan", "time_led"
    ),
    Rule(
        _c(
            rf"^i(?:'m| am)\s+(?:planning|going|intending|hoping|about|scheduled|gonna)"
            rf"(?:\s+(?:to|on))?\s+{_PLAN_NOT}\S.*"
        ),
        "plan",
        "statement",
    ),
    Rule(
        _c(
            rf"^i(?:\s+(?:plan|intend|hope|aim|expect|am going)\s+to|\s+will|'ll|\s+shall)\s+"
            rf"{_PLAN_NOT}\S.*"
        ),
        "plan",
        "statement",
    ),
    Rule(
        _c(
            rf"^i(?:'m| am|'ll| will| have| have got|'ve got)\s+(?!.*\byou(?:r|rs)?\b).*\b"
            rf"{EN_TIME}\b.*"
        ),
        "plan",
        "statement",
    ),
    Rule(
        _c(
            rf"^we(?:'re| are)\s+(?:planning|going|intending|hoping|about|scheduled|gonna)"
            rf"(?:\s+(?:to|on))?\s+{_PLAN_NOT}\S.*"
            rf"|^we\s+(?:(?:plan|intend|hope|aim)\s+to|will)\s+{_PLAN_NOT}\S.*"
        ),
        "plan",
        "statement",
    ),
    Rule(_c(rf"^(?P<t>{ZH_TIME})[，,]?\s*我(?!们)\s*(?P<c>\S.*)"), "plan", "time_led"),
    Rule(
        _c(rf"^我们?(?:打算|计划|准备(?!好)|决定|将要|将会|最近要|想去|要去|{ZH_TIME})(?!一下)"
           r"\s*\S.*"),
        "plan",
        "statement",
    ),
    # Preferences.
    Rule(
        _c(r"^my\s+(?:favou?rite|fave|preferred)\s+\S.{0,60}?\s+(?:is|are|was)\s+\S.*"),
        "preference",
        "statement",
    ),
    Rule(
        _c(
            rf"^i(?:\s+{_PREF_ADV}(?:like|love|prefer|enjoy|hate|dislike|adore|detest|loathe"
            r"|can't stand|cannot stand|can not stand|don't like|do not like|don't enjoy"
            r"|don't really like|do not enjoy|would prefer|would rather)|'d (?:prefer|rather))"
            rf"\s+{_PREF_OBJ}\S.*"
        ),
        "preference",
        "statement",
    ),
    Rule(
        _c(
            rf"^i(?:'m| am)\s+{_EN_ADV}(?:not\s+)?(?:a\s+(?:(?:big|huge|great)\s+)?)?"
            rf"(?:fan of|into|obsessed with|fond of|crazy about|keen on)\s+{_PREF_OBJ}\S.*"
        ),
        "preference",
        "statement",
    ),
    Rule(
        _c(
            rf"^我{_ZH_PREF_ADV}(?:喜欢|喜爱|爱吃|爱喝|爱看|爱玩|爱|讨厌|不喜欢|偏好|偏爱|受不了"
            rf"|不爱|痛恨|不吃|不喝"
            r"|(?:害怕|怕)(?=看|吃|喝|听|坐|冷|热|黑|高|狗|猫|蛇|虫|蜘蛛|老鼠|打针|辣|鬼))"
            rf"\s*{_ZH_PREF_OBJ}\S.*"
        ),
        "preference",
        "statement",
    ),
    # Life events and standing facts: moving, pets, family, work, health, learning.
    Rule(
        _c(
            rf"^i\s+{_EN_ADV}(?:moved|relocated)\s+(?:to|from|into|back|here|abroad|away|out"
            r"|house|in with|across)\b.*"
        ),
        "fact",
        "statement",
    ),
    Rule(
        _c(
            rf"^i\s+{_EN_ADV}(?:(?:adopted|rescued|got|bought)\s+(?:a|an|my first|two|three"
            rf"|another)\s+{_HAVE_NOUNS}(?:new\s+|little\s+|baby\s+|rescue\s+)?(?:dog|cat|puppy"
            r"|kitten|pet|rabbit|bunny|hamster|parrot|bird|fish|horse|turtle|house|home|flat"
            r"|apartment|car|job|position)s?\b"
            r"|got\s+(?:married|engaged|divorced|promoted|hired|fired|laid off|a new job"
            r"|a job|into)\b"
            r"|(?:started|began)\s+(?:(?:a|my)\s+(?:new\s+|first\s+)?(?:job|position|role"
            r"|career|course|class|degree|program|programme|business|company|diet|podcast|blog"
            r"|band|internship)|(?:learning|studying|taking|practicing|practising|playing"
            r"|running|training|working|volunteering|teaching|dating|swimming|cycling|school"
            r"|college|university|therapy|yoga)\b)"
            r"|(?:quit|left)\s+my\s+(?:job|company|team|band|school|program)\b"
            r"|(?:finished|completed|earned|got)\s+my\s+(?:[\w']+\s+)?(?:degree|diploma|masters?"
            r"|master's|phd|doctorate|bachelor's|certificate|certification|studies|thesis"
            r"|apprenticeship)\b"
            r"|(?:joined|graduated|retired)\b(?!\s+(?:the|this|that)\s+(?:call|meeting|chat"
            r"|conversation|channel|server)\b)"
            r"|(?:was|got|have been|'ve been)\s+diagnosed\s+with\b"
            r"|suffer\s+from\b"
            r"|(?:broke|sprained|injured|hurt)\s+my\b"
            r"|(?:took up|picked up|signed up for|enrolled in)\s+(?!(?:it|that|this|the call)\b)"
            r"|have\s+been\s+(?:learning|studying|practicing|practising|taking|training"
            r"|playing|teaching|living|working|volunteering|running|trying to learn)\b).*"
        ),
        "fact",
        "statement",
    ),
    Rule(
        _c(
            rf"^i(?:'ve|\s+have)\s+{_EN_ADV}been\s+(?!\w+ing\s+(?:it|this|that|them|these|those)\b)"
            r"(?:a\s+|an\s+)?[\w\-]+(?:\s+[\w\-]+)?\s+for"
            r"\s+(?:over\s+|almost\s+|nearly\s+|about\s+)?(?:\d+|a|an|one|two|three|four|five"
            r"|six|seven|eight|nine|ten|twenty|several|many|a few)\s+(?:days?|weeks?|months?"
            r"|years?|decades?)\b.*"
        ),
        "fact",
        "statement",
    ),
    Rule(
        _c(
            rf"^i(?:'ve|\s+have)\s+{_EN_ADV}been\s+(?:learning|studying|practicing|practising"
            r"|taking|training|playing|teaching|living|working|volunteering|running"
            r"|trying to learn|diagnosed with)\b.*"
        ),
        "fact",
        "statement",
    ),
    Rule(
        _c(
            r"^i\s+(?:have|'ve got|have got)\s+(?:type [12] diabetes|diabetes|asthma"
            r"|high blood pressure|hypertension|celiac(?: disease)?|arthritis|migraines|adhd"
            r"|autism|anxiety|depression|insomnia|eczema|epilepsy|(?:a |an )?(?:severe |mild )?"
            r"(?:\w+ )?(?:allergy|intolerance))\b.*"
        ),
        "fact",
        "statement",
    ),
    Rule(
        _c(
            rf"^i(?:'m| am)\s+{_EN_ADV}(?:moving|relocating)\s+(?:to|from|into|back|abroad"
            r"|out|in with|house)\b.*"
            rf"|^i(?:'m| am)\s+{_EN_ADV}(?:expecting a baby|expecting twins|recovering from"
            r"|training for|on a diet|taking (?:\w+ )?(?:lessons|classes|a course)"
            r"|trying to (?:lose weight|quit|learn|get pregnant|cut (?:down|back)|eat (?:less|more"
            r"|healthier)|drink less|sleep more|get fit|save))\b.*"
        ),
        "fact",
        "statement",
    ),
    Rule(
        _c(
            r"^i\s+(?:(?:can't|cannot|can not)\s+(?:eat|drink|have|tolerate|digest)"
            r"|(?:don't|do not|no longer|never)\s+(?:eat|drink|smoke))\b"
            r"(?!\s+(?:it|that|this|them|much|anything|enough|any\s+more\s+of\s+(?:it|that))\b).+"
            r"|^i\s+(?:(?:have\s+)?(?:stopped|quit|gave up)\s+(?:eating|drinking|smoking|meat"
            r"|alcohol|sugar|coffee|caffeine|dairy|gluten)\b"
            r"|(?:take|am on|'m on)\s+(?:\w+\s+)?(?:medication|medicine|meds|pills|insulin"
            r"|antidepressants|blood thinners)\b).*"
            r"|^i\s+(?:usually|normally|typically|regularly|often|always)\s+(?:go|run|swim|walk"
            r"|cycle|bike|drink|eat|cook|work|wake|get up|sleep|play|read|watch|take"
            r"|practice|practise|train|visit|spend|do)\b.*"
        ),
        "fact",
        "statement",
    ),
    Rule(
        _c(
            rf"^i\s+{_EN_ADV}(?:practice|practise|train|run|swim|play|study|learn)\s+"
            r"(?!(?:it|that|this|with)\b)[^,]{1,60}?\b(?:every|each)\s+(?:day|morning|evening"
            r"|night|week|weekend|monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b.*"
        ),
        "fact",
        "statement",
    ),
    Rule(
        _c(rf"^(?:my|our)\s+(?:(?:little|older|younger|big|baby|elder|new|best)\s+)?{_FAMILY_EN}"
           rf"(?:\s+[A-Z][\w\-]+)?\s+{_EN_ADV}(?!(?:and|&)\b)[a-z][\w']+\b\s*\S.*"),
        "fact",
        "statement",
    ),
    Rule(
        _c(
            rf"^we(?:'ve| have|'re| are)?\s+{_EN_ADV}(?:adopted|rescued|welcomed|moved"
            r"|relocated|got married|got engaged|had a (?:baby|son|daughter)|had twins"
            r"|expecting|bought a (?:house|home|flat|apartment|car)"
            rf"|(?:got|have|own)\s+(?:a|an|two|three|another)\s+{_HAVE_NOUNS}"
            r"(?:new\s+|little\s+)?(?:dog|cat|puppy|kitten|pet|rabbit|bird|fish|baby|son"
            r"|daughter|kids?|house|car)s?\b|live\s+(?:in|near|with)\b).*"
        ),
        "fact",
        "statement",
    ),
    Rule(
        _c(
            rf"^我(?:们家?|们)?{_ZH_ADV}(?:搬到|搬去|搬来|搬家|搬进|搬回|移居|定居|调到|调去|养了"
            r"|养着|领养了|收养了|捡了|新养了"
    r"|买了(?:一?[辆套栋间台部])?(?:新|二手)?的?[\u4e00-\u9fff]{0,2}?(?:房子?|车)(?=$|[，,。！!])"
    r"|结婚|订婚|离婚|生了|怀孕|换了"
            r"(?:一份|个|份)?(?:新)?(?:工作|公司|城市|专业|房子)|找到(?:了)?(?:新)?工作|入职|辞职"
            r"|离职|跳槽|升职|被裁|退休|毕业|在找(?:新)?工作|找(?:新)?工作|得了|患有|患了|确诊|被诊断|在减肥|在戒烟|在戒酒|骨折"
            r"|失眠|吃素|乳糖不耐|有(?:高血压|糖尿病|哮喘|心脏病|抑郁症|焦虑症|过敏)"
            r"|摔断|摔伤|扭伤|受伤|住院|做了手术|动了手术|(?:要|将|就要|快要)(?:结婚|搬家|生了|退休)"
            r"|(?:大学|研究生|博士|硕士|本科|高中|初中)毕业)\S*.*"
        ),
        "fact",
        "statement",
    ),
    # Habits: "我每天早上喝一杯黑咖啡".
    Rule(
        _c(
            r"^我(?:每天|每晚|每年|每个?(?:周末|早上|晚上|月)|每个?(?:周|星期|礼拜)[一二三四五六日天]?"
            r"|平时|平常"
            r"|通常|一般)(?:早上|晚上|中午|下午|都|会|要|也){0,3}(?:喝|吃|跑|练|去|看|读|骑|游"
            r"|做|睡|起|走|打|弹|写|画|学)\S.*"
        ),
        "fact",
        "statement",
    ),
    Rule(
        _c(rf"^我{_ZH_ADV}(?:在)?(?:学习|学|练习|练|自学|报了|上了)(?![校生到过会了])\S.*"),
        "fact",
        "statement",
    ),
    Rule(
        _c(
            rf"^我{_ZH_ADV}(?:开始|坚持)(?!想|觉得|担心|怀疑|明白|意识|后悔|怀念|有点|慌)\S{{2}}.*"
            r"|^我(?:们)?家(?:里)?(?:有|养了|养着)\S.*"
            r"|^我(?:开|骑|用)的是\S.*"
            rf"|^我{_ZH_ADV}(?:(?:不能|不可以|不敢)(?:吃|喝)|吃不了|喝不了)\S.*"
            r"|^我(?:的)?(?:腰|胃|颈椎|膝盖|肝|心脏|眼睛|视力|睡眠|身体|牙|皮肤|腿|背|肩膀)"
            r"(?:一直)?(?:不好|不太好|有问题|很差|不行|受过伤)\S*.*"
        ),
        "fact",
        "statement",
    ),
    Rule(
        _c(rf"^我(?:们)?(?:的|家的|家)?{_FAMILY_ZH}(?![们的]?[吗呢吧])\S.*"),
        "fact",
        "statement",
    ),
    Rule(
        _c(rf"^我{_ZH_ADV}(?:打算|计划|准备(?!好)|决定|将要|要去|想去|想学|想换|想买)\s*\S.*"),
        "plan",
        "statement",
    ),
    # Facts about the user.
    Rule(_c(r"^my name(?:'s| is)\s+\S.*"), "fact", "statement"),
    Rule(_c(r"^my\s+[\w'\-]+(?:\s+[\w'\-]+)?\s+(?:and|&)\s+i\s+\S.*"), "fact", "statement"),
    Rule(
        _c(r"^i(?:'m| am)\s+(?:severely\s+|very\s+|mildly\s+)?(?:allergic|intolerant)\s+to\s+\S.*"),
        "fact",
        "statement",
    ),
    Rule(_c(rf"^i(?:'m| am)\s+(?:a|an)\s+{_EN_NOT_CHAT}\S.*"), "fact", "statement"),
    Rule(
        _c(
            r"^i(?:'m| am)\s+(?:\d{1,3}\s*(?:years? old|yo|y/o)\b|(?:originally\s+)?from\s+\S"
            r"|based in\s+\S|(?:working|studying|majoring|learning|living)\b"
            r"|(?:vegan|vegetarian|pescatarian|married|single|divorced|engaged|pregnant|retired"
            r"|diabetic|lactose intolerant|left-handed|right-handed|colou?r-?blind|deaf|blind"
            r"|celiac|gluten-free|muslim|christian|jewish|hindu|buddhist|atheist)\b).*"
        ),
        "fact",
        "statement",
    ),
    Rule(
        _c(
            rf"^i\s+(?:currently\s+|still\s+|now\s+|also\s+)?(?:work\s+(?:at|for|as|in|on|with)"
            r"|live\s+(?:in|at|near|on|with)|study|teach|speak|come from|grew up|was born"
            rf"|use|drive|own)\s+{_PREF_OBJ}\S.*"
        ),
        "fact",
        "statement",
    ),
    Rule(
        _c(
            rf"^i\s+{_EN_ADV}(?:have|'ve got|have got|own)\s+(?:a|an|one|two|three|four|five"
            rf"|six|seven|eight|nine|ten|\d+|several|many)\s+{_HAVE_NOUNS}\S.*"
        ),
        "fact",
        "statement",
    ),
    Rule(
        _c(rf"^my\s+{_MY_NOUNS}[\w'\- ]{{1,40}}?\s+(?:is|are|was|were)\s+\S.*"), "fact", "statement"
    ),
    Rule(
        _c(
            r"^我(?:叫|的名字(?:是|叫)|名字叫|对.{1,30}?过敏|今年\d{1,3}岁|来自|毕业于|出生在|出生于"
            r"|在.{1,30}?(?:工作|上班|上学|读书|实习|当|长大)|住在|住|养了|养着|会说)\S*.*"
        ),
        "fact",
        "statement",
    ),
    Rule(
        _c(r"^我是(?![说想问觉不在指否谁个]|认真|开玩笑|随便|真的|一个问|怎么)\s*\S.*"),
        "fact",
        "statement",
    ),
    Rule(
        _c(
            r"^我有(?![点些空事时没]|一点|意思|道理|兴趣|办法|把握|感觉|同感"
            r"|(?:一个|个|几个|一些|些)?\s*(?:问题|bug|错误|报错|疑问|需求|想法|建议|文件|函数"
            r"|代码|表格|列表|数据))\s*\S.*"
        ),
        "fact",
        "statement",
    ),
    Rule(
        _c(r"^我的(?!意思|问题|想法|看法|建议|观点|天)[^是，,]{1,20}?是\s*\S.*"),
        "fact",
        "statement",
    ),
)


# Where neither an explicit request nor any rule can match, `rules._match` stops here: one
# check tells that none applies, which is the common answer, instead of one call a pattern.
ANY_MATCH = AnyOf((*EXPLICIT, *(rule.pattern for rule in RULES)), _I)

IMPORTANCE: dict[Category, int] = {"preference": 6, "fact": 6, "plan": 5, "instruction": 7}
EXPLICIT_IMPORTANCE = 8

# --- English third person -----------------------------------------------------------------

ADVERBS = frozenset(
    "really also absolutely just truly totally still actually generally usually definitely "
    "genuinely seriously always never often sometimes rarely mostly currently now only even "
    "kinda recently finally already officially newly typically normally regularly".split()
)
UNCHANGED_VERBS = frozenset(
    "can could should would will shall may might must can't cannot couldn't shouldn't wouldn't "
    "won't didn't did was were are had used ought went made got saw came took gave found left "
    "bought thought told said knew grew ate drank ran wrote spoke met felt kept lost paid sold "
    "sent spent taught won began became broke chose drove fell flew forgot heard held hit hurt "
    "quit led lit meant put read rode rose set shut sang sat slept stood understood woke wore "
    "moved".split()
)
IRREGULAR_VERBS = {"am": "is", "have": "has", "do": "does", "don't": "doesn't",
                   "haven't": "hasn't", "aren't": "isn't"}  # fmt: skip
EN_START = (
    (_c(r"^(?:i'm|i am|im)\b"), "User is"),
    (_c(r"^my name's\b"), "User's name is"),
    # "My wife and I live ...": a compound subject, so the verb must stay plural.
    (_c(r"^my\s+([\w'\-]+(?:\s+[\w'\-]+)?)\s+(?:and|&)\s+i\b"), r"User's \1 and the user"),
    (_c(r"^i've\b"), "User has"),
    (_c(r"^i'll\b"), "User will"),
    (_c(r"^i'd\b"), "User would"),
    (_c(r"^my\b"), "User's"),
    (_c(r"^our\b"), "User and family's"),
)
EN_I = _c(r"\bi\b(?:'m|'ve|'ll|'d)?(?![/.\-]\w)")
EN_OBJECT_WORDS = _c(r"\b(?:myself|mine|my|me)\b")
ZH_ME = re.compile(r"我(?!们)")
