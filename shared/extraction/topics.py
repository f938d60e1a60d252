"""What a fact is about, named in English and in Chinese: the topic reading that search
reads a fact by besides its own words.

People ask about a fact by its topic, not by its words: "What is my job?" of "User works as
a data analyst at a logistics company", 我住在哪里? of "User moved to Berlin last month".
e5-small scores such a pair barely above the user's unrelated memories, and across
languages below them. So a fact that names one of the topics below (the everyday ones the
default extraction's rules cover: home and moving, pets, family, work, health and diet,
learning, hobbies and sports, likes and dislikes, plans) is also embedded with its topics'
names in both languages before it ("Work, job (工作): User works as …"), as one more
passage of the fact (`memoryd.embeddings.parts.embed_memories`). Its own vector, which
deduplication and conflicts read, stays that of its words: two facts of one topic would
otherwise come closer than the duplicate threshold ("User's sister lives in Lisbon" /
"… brother …"). docs/decisions/0047-a-facts-topic-reading.md.

A topic is named when the fact holds one of its words (a word list per language, not a
classifier): bounded work, linear in the text, the same answer on every host.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from memoryd.records.models import MemoryKind


@dataclass(frozen=True)
class Topic:
    name: str
    label: str  # how the reading names it: English, then Chinese
    words: re.Pattern[str]


def _topic(name: str, label: str, english: str, chinese: str) -> Topic:
    # English words whole (an inflection spelled out where it matters); Chinese words
    # anywhere, as Chinese writes no spaces.
    pattern = rf"\b(?:{english})\b|{chinese}"
    return Topic(name, label, re.compile(pattern, re.IGNORECASE))


_OCCUPATIONS = (
    r"doctor|nurse|teacher|engineer|developer|programmer|designer|analyst|lawyer|accountant"
    r"|chef|cook|driver|pilot|scientist|researcher|professor|consultant|writer|journalist"
    r"|editor|artist|musician|photographer|architect|pharmacist|dentist|vet|veterinarian"
    r"|mechanic|electrician|plumber|farmer|cashier|waiter|waitress|manager|salesperson"
    r"|firefighter|police officer|soldier|translator|banker|librarian|therapist|intern"
)

TOPICS: tuple[Topic, ...] = (
    _topic(
        "home", "Home, where the user lives (住处)",
        r"move[ds]?|moving|relocat(?:e|ed|es|ing)|lives?|lived|living|settled|apartment"
        r"|house|rent(?:s|ed|ing)?|neighbou?rhood|hometown|grew up",
        r"搬|住在|住进|住的|定居|移居|老家|家乡|房子|公寓|租房|买房|长大",
    ),
    _topic(
        "pets", "Pets (宠物)",
        r"cats?|kittens?|dogs?|pupp(?:y|ies)|pets?|hamsters?|rabbits?|bunny|parrots?|turtles?"
        r"|guinea pigs?",
        r"猫|狗|宠物|仓鼠|兔子|鹦鹉|乌龟|金鱼",
    ),
    _topic(
        "family", "Family (家人)",
        r"wife|husband|spouse|partner|sons?|daughters?|kids?|child|children|baby|sisters?"
        r"|brothers?|siblings?|mom|mum|mother|dad|father|parents?|grandma|grandmother|grandpa"
        r"|grandfather|grandparents?|aunt|uncle|cousins?|niece|nephew|in-laws?|fianc[eé]e?"
        r"|girlfriend|boyfriend|family",
        r"老婆|妻子|太太|老公|丈夫|儿子|女儿|孩子|宝宝|姐姐|妹妹|哥哥|弟弟|兄弟|姐妹|妈妈|母亲"
        r"|爸爸|父亲|父母|爷爷|奶奶|外婆|外公|姥姥|姥爷|叔叔|舅舅|姑姑|阿姨|表哥|表姐|表妹|表弟"
        r"|堂哥|堂姐|侄子|侄女|外甥|未婚妻|未婚夫|女朋友|男朋友|家人",
    ),
    _topic(
        "work", "Work, job (工作)",
        # An occupation only as what someone is: "is a nurse", not "saw a doctor".
        rf"works?|worked|working|jobs?|careers?|company|office|employer|employed|colleagues?"
        rf"|coworkers?|boss|salary|promot(?:ed|ion)|hired|fired|retired?|profession|occupation"
        rf"|shifts?|(?:as|is|am|'m|are|became|become)\s+(?:an?\s+)?(?:{_OCCUPATIONS})",
        r"工作|上班|下班|公司|单位|同事|老板|上司|职业|职位|工资|薪水|升职|跳槽|辞职|退休|实习"
        r"|加班|(?:当|是|做|成为)(?:一名|一位|一个|个)?(?:医生|护士|老师|教师|工程师|程序员"
        r"|设计师|律师|会计|厨师|司机|记者|警察|教授|分析师|牙医|兽医)",
    ),
    _topic(
        "health", "Health (健康)",
        r"allerg(?:y|ic|ies)|sick|ill|illness|disease|diabet(?:es|ic)|asthma|blood pressure"
        r"|hypertension|cholesterol|migraines?|headaches?|surgery|injur(?:y|ed|ies)|fracture[ds]?"
        r"|pain|cancer|pregnan(?:t|cy)|therapy|depress(?:ed|ion)|anxiety|insomnia|medications?"
        r"|medicine|diagnos(?:ed|is)|intoleran(?:t|ce)|gluten|lactose|health|healthy|hospital"
        r"|(?:see|sees|saw|seeing)\s+(?:a|the|my|their)\s+(?:doctor|dentist)"
        r"|diet|vegetarian|vegan|keto",
        r"过敏|生病|病了|感冒|发烧|高血压|糖尿病|哮喘|胆固醇|头疼|头痛|手术|受伤|骨折|扭伤|摔断"
        r"|疼|痛|癌|怀孕|失眠|抑郁|焦虑|吃药|住院|医院|体检|健康|不耐受|看医生|看牙医|看病"
        r"|吃素|素食|忌口|节食|减肥",
    ),
    _topic(
        "learning", "Learning (学习)",
        r"learn(?:s|ed|t|ing)?|stud(?:y|ies|ied|ying)|students?|courses?|class(?:es)?"
        r"|lessons?|school|university|college|degree|exams?|practi[cs](?:e|es|ed|ing)|tutor",
        r"学|练习|练|课|考试|大学|学校|培训",
    ),
    _topic(
        "hobbies", "Hobbies, sports (爱好)",
        r"hobby|hobbies|sports?|play(?:s|ed|ing)?|hik(?:e|es|ed|ing)|running|swimming|cycling"
        r"|yoga|gym|tennis|football|soccer|basketball|badminton|golf|chess|painting|drawing"
        r"|gardening|fishing|climbing|knitting|baking|photography",
        r"爱好|运动|健身|打球|篮球|足球|羽毛球|网球|乒乓球|高尔夫|跑步|游泳|骑车|爬山|徒步|瑜伽"
        r"|下棋|钓鱼|画画|摄影|烘焙",
    ),
    _topic(
        "likes", "Likes and dislikes (喜好)",
        r"loves?|loved|likes?|liked|enjoy(?:s|ed)?|favou?rites?|prefers?|preferred|hates?"
        r"|hated|dislikes?|disliked|can't stand|cannot stand|fan of",
        r"喜欢|爱吃|爱喝|爱看|最爱|热爱|讨厌|受不了|偏爱|偏好|迷上|着迷",
    ),
    _topic(
        "plans", "Plans (计划)",
        r"plans?|planned|planning|going to|gonna|will|intends?|next (?:week|weekend|month|year"
        r"|summer|winter|spring|fall|autumn)|tomorrow|upcoming|soon|scheduled|appointment"
        r"|training for|preparing for",
        r"打算|计划|准备|要去|将要|下周|下个月|下个星期|明年|明天|后天|预约|约了|安排",
    ),
)


def topics_of(text: str) -> list[Topic]:
    """The topics `text` names, in `TOPICS` order."""
    return [topic for topic in TOPICS if topic.words.search(text)]


def topic_reading(text: str) -> str | None:
    """The fact as search reads it a second time: its topics' names, then its words; None
    when it names no topic."""
    named = topics_of(text)
    if not named:
        return None
    return "; ".join(t.label for t in named) + ": " + text


def fact_reading(kind: MemoryKind | str | None, text: str) -> str | None:
    """A memory's topic reading when it is a fact (`topic_reading`); None for an episode
    or a note, which have none. Its parts are its passages, then this reading."""
    return topic_reading(text) if kind == MemoryKind.FACT else None
