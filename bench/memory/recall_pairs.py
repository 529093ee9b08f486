"""The labelled set of the recall bench (bench/README.md, "Memory recall"): memories as the
memory service stores them (the neutral form, "The user …" / "用户…"), each in English and in
Chinese, and questions a person asks in a chat turn, each in English and in Chinese, with the
memories that matter to each. Every question is paired with its memories and with unrelated
ones in the four language pairs (en-en, zh-zh, en-zh: an English question about a Chinese
memory, zh-en). Questions marked `held_out` are not looked at when the floor is chosen: they
check it.

Kept realistic on purpose: the memories are what people tell an assistant (health, family, work,
preferences, schedule, pets, places), the questions how they ask, mostly without the memory's
words ("suggest a dinner" → the peanut allergy)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

# id: (English, Chinese)
MEMORIES: dict[str, tuple[str, str]] = {
    "peanuts": ("The user is allergic to peanuts.", "用户对花生过敏。"),
    "vegetarian": ("The user is vegetarian.", "用户是素食者。"),
    "asthma": ("The user has asthma and uses an inhaler.", "用户有哮喘，平时用吸入器。"),
    "blood_pressure": ("The user takes medication for high blood pressure every morning.",
                       "用户每天早上吃降压药。"),
    "sister": ("The user's sister is called Lena.", "用户的妹妹叫莉娜。"),
    "daughter": ("The user's daughter studies at a university in Shanghai.", "用户的女儿在上海读大学。"),
    "wife": ("The user's wife is called Anna.", "用户的妻子叫安娜。"),
    "mother_birthday": ("The user's mother's birthday is on March 3rd.", "用户妈妈的生日是3月3日。"),
    "nurse": ("The user works as a nurse at the city hospital.", "用户在市医院当护士。"),
    "boss": ("The user's boss is called Tom.", "用户的老板叫汤姆。"),
    "project": ("The user is leading a data migration project at work.", "用户在工作中负责一个数据迁移项目。"),
    "coffee": ("The user drinks coffee without sugar.", "用户喝咖啡不加糖。"),
    "short_answers": ("The user prefers short answers.", "用户喜欢简短的回答。"),
    "jazz": ("The user likes jazz music.", "用户喜欢爵士乐。"),
    "spicy": ("The user loves spicy food.", "用户喜欢吃辣。"),
    "gym": ("The user goes to the gym on Monday and Thursday evenings.", "用户每周一和周四晚上去健身房。"),
    "wake": ("The user gets up at 6 every morning.", "用户每天早上6点起床。"),
    "dentist": ("The user has a dentist appointment every six months.", "用户每半年看一次牙医。"),
    "dog": ("The user has a dog called Max.", "用户有一只叫Max的狗。"),
    "cat_food": ("The user's cat only eats wet food.", "用户的猫只吃湿粮。"),
    "berlin": ("The user lives in Berlin.", "用户住在柏林。"),
    "hometown": ("The user grew up in Chengdu.", "用户在成都长大。"),
    "car": ("The user drives a red Toyota.", "用户开一辆红色的丰田车。"),
    "name": ("The user's name is Alice.", "用户的名字叫爱丽丝。"),
    "learning_japanese": ("The user is learning Japanese.", "用户正在学日语。"),
    "marathon": ("The user is training for a marathon in October.", "用户正在为十月的马拉松做训练。"),
}


@dataclass(frozen=True)
class Question:
    en: str
    zh: str
    memories: tuple[str, ...]          # the memories that matter to it
    held_out: bool = False
    arguable: tuple[str, ...] = ()     # memories that may or may not matter: paired with neither


QUESTIONS: list[Question] = [
    Question("Can you suggest a snack for the flight?", "飞机上吃什么零食好？", ("peanuts",)),
    Question("Is satay sauce safe for me to eat?", "我能吃沙爹酱吗？", ("peanuts",), held_out=True),
    Question("What should I cook for dinner tonight?", "今晚做什么菜好？", ("vegetarian", "spicy")),
    Question("Recommend a restaurant for my birthday.", "推荐一家餐厅给我过生日。", ("vegetarian",), held_out=True),
    Question("The air quality is bad today, should I go running?", "今天空气不好，我还能去跑步吗？",
             ("asthma", "marathon")),
    Question("Remind me what medicine I take.", "我平时吃什么药？", ("blood_pressure",)),
    Question("My sister is visiting, any ideas for the weekend?", "我妹妹要来看我，周末安排点什么？", ("sister",)),
    Question("What's my sister's name again?", "我妹妹叫什么名字？", ("sister",), held_out=True),
    Question("Where does my daughter study?", "我女儿在哪里上学？", ("daughter",)),
    Question("What gift should I buy my wife for our anniversary?", "结婚纪念日送老婆什么礼物好？", ("wife",)),
    Question("When is my mom's birthday?", "我妈妈生日是哪天？", ("mother_birthday",), held_out=True),
    Question("What is my job?", "我是做什么工作的？", ("nurse",)),
    Question("How can I cope with night shifts at the hospital?", "在医院上夜班怎么调整作息？", ("nurse",)),
    Question("How should I ask my boss for a raise?", "我该怎么跟老板提加薪？", ("boss",), held_out=True),
    Question("Help me plan the next steps of my project at work.", "帮我规划一下工作项目的下一步。", ("project",)),
    Question("How do I usually take my coffee?", "我喝咖啡加糖吗？", ("coffee",)),
    Question("How long should your answers be for me?", "你回答我的时候应该说多长？", ("short_answers",), held_out=True),
    Question("Recommend some music for tonight.", "推荐一些今晚听的音乐。", ("jazz",)),
    Question("Which concert should I go to this weekend?", "这周末去听什么音乐会好？", ("jazz",)),
    Question("Which days do I work out?", "我哪几天去健身？", ("gym",), held_out=True),
    Question("What time do I wake up?", "我每天几点起床？", ("wake",)),
    Question("When should I book my next dental checkup?", "下次洗牙应该什么时候约？", ("dentist",)),
    Question("Who will look after my dog while I travel?", "我出差的时候谁来照顾我的狗？", ("dog",), held_out=True),
    Question("What's my dog called?", "我的狗叫什么？", ("dog",)),
    Question("What should I feed my cat?", "我的猫该喂什么？", ("cat_food",)),
    Question("What's the weather like where I live?", "我住的地方天气怎么样？", ("berlin",), held_out=True),
    Question("Find me a good bakery near my home.", "我家附近有什么好的面包店？", ("berlin",)),
    Question("Where did I grow up?", "我是在哪里长大的？", ("hometown",)),
    Question("When is my car due for a service?", "我的车什么时候该保养了？", ("car",), held_out=True),
    Question("Do you remember my name?", "你记得我叫什么吗？", ("name",)),
    Question("Suggest a way to practise my Japanese.", "怎么练习我的日语？", ("learning_japanese",)),
    Question("How many kilometres should I run this week for my race?", "为了比赛这周我该跑多少公里？",
             ("marathon",), held_out=True),
]

# Questions about nothing the person told: every memory is unrelated to them.
UNRELATED_QUESTIONS: list[Question] = [
    Question("Tell me a joke.", "给我讲个笑话。", ()),
    Question("What is the capital of Australia?", "澳大利亚的首都是哪里？", ()),
    Question("Translate 'good morning' into French.", "把“早上好”翻译成法语。", ()),
    Question("Write a short poem about the sea.", "写一首关于大海的短诗。", (), held_out=True),
    Question("How do I convert Celsius to Fahrenheit?", "摄氏度怎么换算成华氏度？", ()),
    Question("Explain how a rainbow forms.", "彩虹是怎么形成的？", (), held_out=True),
]

GROUPS = ("en-en", "zh-zh", "en-zh", "zh-en")
UNRELATED_PER_QUESTION = 3


# A second held-out set, written after the first figures and never looked at while the scoring
# and its floor were chosen (bench/README.md, "Memory recall"): new questions, some about memories
# of their own, paired like the others with unrelated memories of either set.
FRESH_MEMORIES: dict[str, tuple[str, str]] = {
    "tennis": ("The user plays tennis on weekends.", "用户周末打网球。"),
    "lactose": ("The user is lactose intolerant.", "用户乳糖不耐受。"),
    "glasses": ("The user is short-sighted and wears glasses.", "用户近视，戴眼镜。"),
    "flat": ("The user rents a flat on the fourth floor without a lift.", "用户租住在没有电梯的四楼。"),
}

FRESH_QUESTIONS: list[Question] = [
    Question("Can I have a milkshake with my lunch?", "午饭能配一杯奶昔吗？", ("lactose",),
             arguable=("peanuts", "vegetarian")),
    Question("Which cheese won't upset my stomach?", "什么奶酪吃了我肚子不会难受？", ("lactose",)),
    Question("Find me a court to play on this Saturday.", "这周六帮我找个场地打球。", ("tennis",)),
    Question("My elbow hurts after my weekend games, what can I do?", "周末打完球手肘疼，怎么办？", ("tennis",)),
    Question("Should I get laser eye surgery?", "我该去做激光近视手术吗？", ("glasses",)),
    Question("Can I get a washing machine delivered easily?", "买洗衣机送货上门方便吗？", ("flat",)),
    Question("Help me write a birthday card for my wife.", "帮我给老婆写张生日贺卡。", ("wife",),
             arguable=("name",)),
    Question("My mom's birthday is coming up, what should I buy?", "我妈妈快过生日了，买什么好？",
             ("mother_birthday",)),
    Question("Plan a trip to visit my daughter.", "帮我安排一次去看女儿的行程。", ("daughter",)),
    Question("Is it okay to take ibuprofen with my pills?", "布洛芬能和我平时吃的药一起吃吗？", ("blood_pressure",)),
    Question("Where can I walk my dog when it rains?", "下雨天我可以去哪里遛狗？", ("dog",)),
    Question("How should I taper in the last weeks before my race?", "比赛前最后几周怎么减量训练？", ("marathon",)),
    Question("Recommend a phrasebook for my trip to Tokyo.", "去东京旅行，推荐一本会话手册。", ("learning_japanese",)),
    Question("Is it going to snow here this week?", "这周我这儿会下雪吗？", ("berlin",)),
    Question("Recommend a hot pot place like the ones back home.", "推荐一家像老家那样的火锅店。", ("hometown", "spicy")),
    Question("How often should I change the oil in my car?", "我的车多久换一次机油？", ("car",)),
    Question("Write a reply to my manager's email about the deadline.", "帮我回复经理关于截止日期的邮件。",
             ("boss", "project")),
    Question("How can I stay alert during a long shift on the ward?", "在病房值长班怎么保持清醒？", ("nurse",)),
    Question("I have hay fever, will it affect my breathing?", "我花粉过敏了，会影响呼吸吗？", ("asthma",)),
    Question("Set an alarm for tomorrow morning.", "帮我定个明早的闹钟。", ("wake",)),
    Question("Book me a personal trainer on my usual workout evenings.", "帮我在平时健身的那几天晚上约个私教。", ("gym",),
             arguable=("marathon", "asthma")),
    Question("Summarise this article for me.", "帮我总结一下这篇文章。", ("short_answers",)),
    Question("My teeth hurt when I drink something cold.", "我的牙齿喝冷饮会酸痛。", ("dentist",)),
    Question("My cat is refusing her dinner, what should I do?", "我的猫不肯吃晚饭，怎么办？", ("cat_food",)),
    Question("Help me plan a surprise for my little sister.", "帮我给妹妹准备个惊喜。", ("sister",)),
    Question("How many planets are in the solar system?", "太阳系有几颗行星？", ()),
    Question("Explain what a black hole is.", "黑洞是什么？", ()),
    Question("Who wrote Romeo and Juliet?", "《罗密欧与朱丽叶》是谁写的？", ()),
    Question("Convert 5 miles to kilometres.", "5英里等于多少公里？", ()),
]


# A third held-out set, written before any method beyond the two models' mean was tried and not
# used to choose one (bench/README.md, "Memory recall"): new questions, some about memories of
# their own, a few about nothing remembered (one of them sharing a memory's word).
THIRD_MEMORIES: dict[str, tuple[str, str]] = {
    "shellfish": ("The user is allergic to shellfish.", "用户对贝类过敏。"),
    "diabetes": ("The user has type 2 diabetes.", "用户患有二型糖尿病。"),
    "guitar": ("The user is learning to play the guitar.", "用户在学弹吉他。"),
    "cycling_commute": ("The user cycles to work.", "用户骑自行车上班。"),
    "grandmother": ("The user's grandmother lives in a care home in Hangzhou.", "用户的奶奶住在杭州的一家养老院。"),
}

THIRD_QUESTIONS: list[Question] = [
    Question("What can I order at a seafood restaurant?", "去海鲜餐厅我能点什么？", ("shellfish",),
             arguable=("peanuts", "vegetarian", "spicy", "diabetes", "lactose")),
    Question("Is prawn curry a good idea for me?", "我可以吃咖喱虾吗？", ("shellfish",),
             arguable=("peanuts", "vegetarian", "spicy", "diabetes", "lactose")),
    Question("Which breakfast cereals are best for my blood sugar?", "哪种早餐麦片对我的血糖好？", ("diabetes",),
             arguable=("lactose", "peanuts")),
    Question("Can I eat a slice of birthday cake?", "我能吃一块生日蛋糕吗？", ("diabetes",),
             arguable=("lactose", "peanuts", "vegetarian")),
    Question("Which chords should I practise first?", "我应该先练哪些和弦？", ("guitar",)),
    Question("My fingertips are sore after practising, is that normal?", "练完琴指尖疼，正常吗？", ("guitar",)),
    Question("What should I wear for my ride to the office in the rain?", "下雨天骑车去公司穿什么好？",
             ("cycling_commute",), arguable=("berlin",)),
    Question("Is my route to work safe after dark?", "天黑以后我上下班的路安全吗？", ("cycling_commute",),
             arguable=("berlin", "nurse")),
    Question("What can I bring my grandma when I visit her?", "去看奶奶带点什么好？", ("grandmother",)),
    Question("How long does the train take to see my grandmother?", "坐火车去看奶奶要多久？", ("grandmother",),
             arguable=("berlin",)),
    Question("Which chocolate bars are safe for me?", "哪些巧克力棒我能放心吃？", ("peanuts",),
             arguable=("lactose", "diabetes", "vegetarian")),
    Question("Put together a menu for a barbecue party.", "帮我准备一份烧烤聚会的菜单。", ("vegetarian",),
             arguable=("spicy", "shellfish", "peanuts", "diabetes", "lactose")),
    Question("I get out of breath climbing stairs, is that a concern?", "我爬楼梯就喘不过气，要紧吗？", ("asthma",),
             arguable=("flat", "blood_pressure")),
    Question("I feel dizzy when I stand up, could it be my tablets?", "我一站起来就头晕，会不会是药的问题？",
             ("blood_pressure",), arguable=("diabetes",)),
    Question("Lena's birthday is next week, any gift ideas?", "莉娜下周过生日，送什么好？", ("sister",)),
    Question("How do I send a parcel to my daughter?", "怎么给女儿寄个包裹？", ("daughter",)),
    Question("Plan a romantic evening for Anna and me.", "帮我和安娜安排一个浪漫的晚上。", ("wife",),
             arguable=("vegetarian", "jazz")),
    Question("I have to explain to the team why the database cutover is late.", "我得跟团队解释数据库切换为什么延期。",
             ("project",), arguable=("boss",)),
    Question("What do I say to Tom about taking Friday off?", "我该怎么跟汤姆说周五请假？", ("boss",)),
    Question("How do I deal with a difficult patient?", "怎么应对难缠的病人？", ("nurse",)),
    Question("How do I make a good espresso at home?", "在家怎么做一杯好的意式浓缩？", ("coffee",)),
    Question("Any good albums by Miles Davis?", "迈尔斯·戴维斯有什么好专辑？", ("jazz",)),
    Question("Can you find me a Sichuan restaurant?", "帮我找一家川菜馆。", ("spicy", "hometown"),
             arguable=("vegetarian", "peanuts", "shellfish")),
    Question("Can I join the book club on Thursday evenings?", "周四晚上的读书会我能参加吗？", ("gym",)),
    Question("What time should I go to bed?", "我该几点睡觉？", ("wake",)),
    Question("My gums are bleeding, when should I get them checked?", "我牙龈出血，什么时候该去检查？", ("dentist",)),
    Question("Is chocolate dangerous for my pets?", "巧克力对我的宠物有危险吗？", ("dog", "cat_food")),
    Question("Do I need an umbrella today?", "今天出门要带伞吗？", ("berlin",), arguable=("cycling_commute",)),
    Question("Where can I get winter tyres fitted?", "冬天换雪地胎去哪里换？", ("car",), arguable=("berlin",)),
    Question("How do I say thank you politely in Japanese?", "日语里怎么礼貌地说谢谢？", ("learning_japanese",)),
    Question("How do I avoid blisters on long runs?", "长跑怎么避免脚磨出水泡？", ("marathon",)),
    Question("Is yoghurt okay for me?", "我能喝酸奶吗？", ("lactose",), arguable=("diabetes",)),
    Question("How do I get a new sofa up to my place?", "新沙发怎么搬上楼？", ("flat",)),
    Question("Recommend a racket for a club player.", "给业余球员推荐一把球拍。", ("tennis",)),
    Question("Driving at night makes my eyes tired.", "晚上开车眼睛很累。", ("glasses",), arguable=("car",)),
    Question("How tall is Mount Everest?", "珠穆朗玛峰有多高？", ()),
    Question("What does the word 'serendipity' mean?", "“serendipity”这个词是什么意思？", ()),
    Question("Why is the sky blue?", "天空为什么是蓝色的？", ()),
    Question("Give me a riddle.", "给我出个谜语。", ()),
    Question("When did the Berlin Wall fall?", "柏林墙是哪一年倒塌的？", ()),
    Question("How many bones are in the human body?", "人体有多少块骨头？", ()),
]


@dataclass(frozen=True)
class Pair:
    question: str
    memory: str
    group: str           # the question's language, then the memory's
    relevant: bool
    held_out: bool
    fresh: bool = False  # of the second held-out set (FRESH_QUESTIONS)
    third: bool = False  # of the third held-out set (THIRD_QUESTIONS)


def _unrelated(index: int, question: Question) -> list[str]:
    """A fixed spread of memories that do not matter to the question (none of its own, none of a
    question that shares one of its memories)."""
    related = set(question.memories)
    for other in QUESTIONS:
        if related & set(other.memories):
            related |= set(other.memories)
    ids = [key for key in MEMORIES if key not in related]
    step = 7
    return [ids[(index * step + k * 5) % len(ids)] for k in range(UNRELATED_PER_QUESTION)]


def _fresh_unrelated(index: int, question: Question) -> list[str]:
    """As `_unrelated`, over both sets' memories, for the second held-out set."""
    related = set(question.memories) | set(question.arguable)
    for other in QUESTIONS + FRESH_QUESTIONS:
        if related & set(other.memories):
            related |= set(other.memories)
    ids = [key for key in {**MEMORIES, **FRESH_MEMORIES} if key not in related]
    return [ids[(index * 11 + k * 7) % len(ids)] for k in range(UNRELATED_PER_QUESTION)]


def _third_unrelated(index: int, question: Question) -> list[str]:
    """As `_unrelated`, over the three sets' memories, for the third held-out set."""
    related = set(question.memories) | set(question.arguable)
    for other in QUESTIONS + FRESH_QUESTIONS + THIRD_QUESTIONS:
        if related & set(other.memories):
            related |= set(other.memories)
    ids = [key for key in {**MEMORIES, **FRESH_MEMORIES, **THIRD_MEMORIES} if key not in related]
    return [ids[(index * 13 + k * 9) % len(ids)] for k in range(UNRELATED_PER_QUESTION)]


def _in_groups(question: Question, labelled: list[tuple[str, bool]], memories: dict[str, tuple[str, str]],
               fresh: bool, third: bool = False) -> Iterator[Pair]:
    for key, relevant in labelled:
        memory = memories[key]
        for group in GROUPS:
            asked, stored = group.split("-")
            yield Pair(question.en if asked == "en" else question.zh, memory[0] if stored == "en" else memory[1],
                       group, relevant, question.held_out or fresh or third, fresh, third)


def pairs(*, fresh: bool = True, third: bool = True) -> Iterator[Pair]:
    """Every labelled pair; `fresh=False` leaves out the second held-out set, `third=False` the third."""
    for index, question in enumerate(QUESTIONS + UNRELATED_QUESTIONS):
        labelled = [(key, True) for key in question.memories] + [(key, False) for key in _unrelated(index, question)]
        yield from _in_groups(question, labelled, MEMORIES, False)
    if fresh:
        every = {**MEMORIES, **FRESH_MEMORIES}
        for index, question in enumerate(FRESH_QUESTIONS):
            labelled = ([(key, True) for key in question.memories]
                        + [(key, False) for key in _fresh_unrelated(index, question)])
            yield from _in_groups(question, labelled, every, True)
    if third:
        every = {**MEMORIES, **FRESH_MEMORIES, **THIRD_MEMORIES}
        for index, question in enumerate(THIRD_QUESTIONS):
            labelled = ([(key, True) for key in question.memories]
                        + [(key, False) for key in _third_unrelated(index, question)])
            yield from _in_groups(question, labelled, every, False, True)
