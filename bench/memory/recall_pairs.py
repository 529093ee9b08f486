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


# A fourth held-out set, written after the third set had been looked at and before any method
# beyond the two models' mean and the shared words was tried, to judge such a method fairly
# (bench/README.md, "Memory recall"): new questions, some about memories of their own, a few about
# nothing remembered.
FOURTH_MEMORIES: dict[str, tuple[str, str]] = {
    "gluten": ("The user has coeliac disease and cannot eat gluten.", "用户有乳糜泻，不能吃含麸质的食物。"),
    "flying": ("The user is afraid of flying.", "用户害怕坐飞机。"),
    "twins": ("The user has twin sons who are five years old.", "用户有一对五岁的双胞胎儿子。"),
    "garden": ("The user grows vegetables in a small garden.", "用户在一个小园子里种菜。"),
    "back_pain": ("The user has a bad back.", "用户腰不好。"),
}

_FOOD = ("peanuts", "vegetarian", "spicy", "shellfish", "diabetes", "lactose", "gluten")

FOURTH_QUESTIONS: list[Question] = [
    Question("Can I have a bowl of ramen for lunch?", "午饭我能吃一碗拉面吗？", ("gluten",), arguable=_FOOD),
    Question("Which beers can I drink at the pub?", "去酒吧我能喝哪些啤酒？", ("gluten",),
             arguable=("diabetes", "blood_pressure")),
    Question("Find me a bakery with something I can eat.", "帮我找家有我能吃的东西的面包店。", ("gluten",),
             arguable=_FOOD + ("berlin",)),
    Question("Is it better to take the train or fly to Rome?", "去罗马坐火车好还是坐飞机好？", ("flying",),
             arguable=("berlin",)),
    Question("I have a work trip to New York next month, how do I get through the journey?",
             "下个月我要去纽约出差，路上怎么熬过去？", ("flying",), arguable=("project", "boss", "back_pain")),
    Question("Plan a holiday for the family this summer.", "帮我规划一下今年夏天的家庭旅行。", ("twins", "flying"),
             arguable=("wife", "daughter", "dog", "car", "berlin", "cat_food")),
    Question("What's a good birthday party idea for five-year-olds?", "五岁小孩的生日派对怎么办？", ("twins",)),
    Question("The boys won't go to sleep, any tips?", "两个孩子晚上不肯睡觉，有什么办法？", ("twins",),
             arguable=("wake",)),
    Question("Which car seat should I buy for my kids?", "给孩子买什么安全座椅好？", ("twins", "car")),
    Question("When should I plant tomatoes?", "番茄什么时候种？", ("garden",), arguable=("berlin",)),
    Question("Slugs are eating my lettuce, what can I do?", "蛞蝓在吃我的生菜，怎么办？", ("garden",)),
    Question("Recommend a good office chair.", "推荐一把好的办公椅。", ("back_pain",), arguable=("project",)),
    Question("Is it okay for me to carry heavy boxes when I move house?", "搬家的时候我能搬重箱子吗？",
             ("back_pain",), arguable=("flat",)),
    Question("What kind of mattress should I get?", "我该买什么样的床垫？", ("back_pain",)),
    Question("I'm going to a Thai restaurant tonight, what should I avoid?", "今晚去吃泰国菜，我要注意什么？",
             ("peanuts", "shellfish"), arguable=_FOOD),
    Question("Give me a recipe for a quick weeknight dinner.", "给我一个工作日晚上快手晚餐的菜谱。", ("vegetarian",),
             arguable=_FOOD),
    Question("It's freezing outside, will that affect my breathing?", "外面很冷，会影响我呼吸吗？", ("asthma",),
             arguable=("berlin",)),
    Question("Can I drink grapefruit juice?", "我能喝西柚汁吗？", ("blood_pressure",), arguable=("diabetes",)),
    Question("My sister just had a baby, what should I send her?", "我妹妹刚生了宝宝，送点什么好？", ("sister",)),
    Question("What's the time difference between me and my daughter?", "我和女儿那边有几个小时的时差？",
             ("daughter", "berlin")),
    Question("Anna is feeling down, how can I cheer her up?", "安娜心情不好，我怎么让她开心点？", ("wife",)),
    Question("I want to plan something special for my mum next March.", "明年三月我想给妈妈准备点特别的。",
             ("mother_birthday",)),
    Question("How do I break bad news to a patient's family?", "怎么把坏消息告诉病人家属？", ("nurse",)),
    Question("Draft a status update for my team.", "帮我给团队写一份进度汇报。", ("project",),
             arguable=("boss", "short_answers")),
    Question("Is it bad to have a cup late in the afternoon?", "下午晚些时候再喝一杯不好吗？", ("coffee",),
             arguable=("wake",)),
    Question("Explain quantum computing to me.", "给我讲讲量子计算。", ("short_answers",)),
    Question("Put on something relaxing.", "放点轻松的音乐。", ("jazz",)),
    Question("Which hot sauce should I try?", "我该试试哪种辣酱？", ("spicy",), arguable=("hometown",)),
    Question("Can I move my workout to Tuesday this week?", "这周我能把锻炼改到周二吗？", ("gym",)),
    Question("How much sleep do I get if I go to bed at midnight?", "如果我半夜十二点睡，能睡几个小时？", ("wake",)),
    Question("My dog keeps barking at night.", "我的狗晚上一直叫。", ("dog",)),
    Question("How do I get my cat to drink more water?", "怎么让我的猫多喝水？", ("cat_food",)),
    Question("Are there any events in my city this weekend?", "这周末我所在的城市有什么活动？", ("berlin",)),
    Question("I miss the food from home, where can I find some?", "我想念家乡菜了，哪里能吃到？", ("hometown",),
             arguable=("spicy", "berlin")),
    Question("Where is the cheapest petrol near me?", "附近哪里加油最便宜？", ("car",), arguable=("berlin",)),
    Question("Sign this email with my name.", "在这封邮件结尾署上我的名字。", ("name",)),
    Question("Which anime would help my listening practice?", "看哪些动漫能练我的听力？", ("learning_japanese",)),
    Question("What should I eat the night before a long run?", "长跑前一晚吃什么好？", ("marathon",),
             arguable=_FOOD),
    Question("Should I have a glass of milk before bed?", "睡前喝杯牛奶好吗？", ("lactose",),
             arguable=("wake", "diabetes")),
    Question("Who could I play doubles with this weekend?", "这周末我能找谁一起打双打？", ("tennis",),
             arguable=("wife", "sister")),
    Question("My eyes feel dry after a day at the screen.", "看了一天屏幕眼睛很干。", ("glasses",)),
    Question("The shopping is heavy to carry home, any ideas?", "买的菜太重，拿回家很累，有什么办法？", ("flat",),
             arguable=("back_pain", "car")),
    Question("Is fruit a good snack for me?", "水果当零食对我好吗？", ("diabetes",), arguable=_FOOD),
    Question("Which songs are easy for a beginner to strum?", "初学者适合弹什么歌？", ("guitar",)),
    Question("My bike chain keeps slipping.", "我的自行车链条老是掉。", ("cycling_commute",)),
    Question("Can I video call my grandma?", "我能和奶奶视频通话吗？", ("grandmother",)),
    Question("What's the difference between a virus and a bacterium?", "病毒和细菌有什么区别？", ()),
    Question("Who painted the Mona Lisa?", "《蒙娜丽莎》是谁画的？", ()),
    Question("What is 15% of 80?", "80的15%是多少？", ()),
    Question("Recommend a good science fiction novel.", "推荐一本好看的科幻小说。", ()),
    Question("How do I take a screenshot on a Mac?", "Mac上怎么截图？", ()),
    Question("What is the longest river in the world?", "世界上最长的河是哪条？", ()),
    Question("Help me write a thank-you note to a colleague.", "帮我给同事写一张感谢卡。", (),
             arguable=("boss", "project", "nurse")),
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
    fourth: bool = False  # of the fourth held-out set (FOURTH_QUESTIONS)


def _unrelated(index: int, question: Question, questions: list[Question], memories: dict[str, tuple[str, str]],
               steps: tuple[int, int]) -> list[str]:
    """A fixed spread of memories that do not matter to the question (none of its own or arguable,
    none of a question among `questions` that shares one of its memories): each set its own
    `steps`, over the memories of its set and those before it."""
    related = set(question.memories) | set(question.arguable)
    for other in questions:
        if related & set(other.memories):
            related |= set(other.memories)
    ids = [key for key in memories if key not in related]
    return [ids[(index * steps[0] + k * steps[1]) % len(ids)] for k in range(UNRELATED_PER_QUESTION)]


def _in_groups(question: Question, labelled: list[tuple[str, bool]], memories: dict[str, tuple[str, str]],
               part: str) -> Iterator[Pair]:
    fresh, third, fourth = part == "fresh", part == "third", part == "fourth"
    for key, relevant in labelled:
        memory = memories[key]
        for group in GROUPS:
            asked, stored = group.split("-")
            yield Pair(question.en if asked == "en" else question.zh, memory[0] if stored == "en" else memory[1],
                       group, relevant, question.held_out or fresh or third or fourth, fresh, third, fourth)


def pairs(*, fresh: bool = True, third: bool = True, fourth: bool = True) -> Iterator[Pair]:
    """Every labelled pair; `fresh=False` leaves out the second held-out set, `third=False` the
    third, `fourth=False` the fourth."""
    sets = [(QUESTIONS + UNRELATED_QUESTIONS, MEMORIES, (7, 5), "first", QUESTIONS)]
    if fresh:
        sets.append((FRESH_QUESTIONS, FRESH_MEMORIES, (11, 7), "fresh", FRESH_QUESTIONS))
    if third:
        sets.append((THIRD_QUESTIONS, THIRD_MEMORIES, (13, 9), "third", THIRD_QUESTIONS))
    if fourth:
        sets.append((FOURTH_QUESTIONS, FOURTH_MEMORIES, (17, 11), "fourth", FOURTH_QUESTIONS))
    every: dict[str, tuple[str, str]] = {}
    related: list[Question] = []    # the questions whose memories an unrelated one must not share
    for questions, memories, steps, part, asked in sets:
        every, related = {**every, **memories}, related + asked
        for index, question in enumerate(questions):
            unrelated = _unrelated(index, question, related, every, steps)
            labelled = [(key, True) for key in question.memories] + [(key, False) for key in unrelated]
            yield from _in_groups(question, labelled, every, part)
