"""Topic signals tried on top of the memory relevance and not kept (bench/README.md, "Memory
recall", "Topic signals"): zero-shot topics from the two models the relevance already uses,
agreeing between the question and the memory, added to the relevance as a small bonus. Each is
judged as it was chosen: on the earlier parts and the 3rd held-out set together, by the best
recall at precision ≥ 0.9 with the floor free. The 4th set is read only for the one signal that
did best there (`--fourth`), as it was once.

    python -m bench.memory.topics            # the table the README quotes
    python -m bench.memory.topics --fourth   # and the best signal on the 4th set
"""
from __future__ import annotations

import argparse
import asyncio
from dataclasses import dataclass
from typing import Callable

import numpy as np

from gateway.embeddings import LocalE5Embedder
from plugins.memory.relevance import SecondOpinion

from .recall import Scored, score_pairs
from .recall_pairs import FOURTH_MEMORIES, FRESH_MEMORIES, MEMORIES, THIRD_MEMORIES

# topic: (English descriptions, Chinese descriptions)
TOPICS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "food": (("Food, meals and cooking.", "Restaurants, dishes and snacks.", "What someone eats and drinks."),
             ("食物、饭菜和做饭。", "餐厅、菜肴和零食。", "吃什么喝什么。")),
    "health": (("Health, illness and medicine.", "Allergies, symptoms and the doctor.",
                "The body, pain and treatment."), ("健康、疾病和药物。", "过敏、症状和看医生。", "身体、疼痛和治疗。")),
    "weather_place": (("The weather: rain, snow, heat and cold.", "The city or town where someone lives.",
                       "The neighbourhood and local places nearby."), ("天气：下雨、下雪、冷热。", "某人居住的城市。", "附近的街区和地方。")),
    "travel": (("Travel, trips and holidays.", "Flights, trains and hotels.", "Visiting another city or country."),
               ("旅行、出游和度假。", "飞机、火车和酒店。", "去另一个城市或国家。")),
    "vehicle": (("Cars, driving and vehicles.", "Commuting to work by bike, bus or car.",
                 "Car repairs, fuel and parking."), ("汽车、开车和交通工具。", "骑车、坐公交或开车上下班。", "修车、加油和停车。")),
    "family": (("Family: spouse, children and parents.", "Relatives, grandparents and siblings.",
                "Gifts and birthdays for loved ones."), ("家人：配偶、孩子和父母。", "亲戚、祖父母和兄弟姐妹。", "给亲人的礼物和生日。")),
    "work": (("Work, the job and the office.", "Colleagues, the boss and projects.",
              "Meetings, deadlines and emails at work."), ("工作、职业和办公室。", "同事、老板和项目。", "工作上的会议、截止日期和邮件。")),
    "schedule": (("The daily routine: waking up and going to bed.", "Appointments and the weekly schedule.",
                  "Sleep and rest."), ("日常作息：起床和睡觉。", "预约和每周的日程。", "睡眠和休息。")),
    "music_hobby": (("Music, songs and instruments.", "Hobbies, games and reading.",
                     "Learning a new skill or a language."), ("音乐、歌曲和乐器。", "爱好、游戏和读书。", "学习新技能或外语。")),
    "sport": (("Sport, exercise and fitness.", "Running, the gym and training.", "Playing a ball game."),
              ("运动、锻炼和健身。", "跑步、健身房和训练。", "打球。")),
    "home": (("The home, the flat and furniture.", "Household chores, appliances and devices.",
              "The garden and plants."), ("家、房子和家具。", "家务、家电和设备。", "花园和植物。")),
    "pets": (("Pets: dogs and cats.", "Feeding and walking a pet.", "Animals and the vet."),
             ("宠物：狗和猫。", "喂宠物和遛狗。", "动物和兽医。")),
    "finance": (("Money, savings and bills.", "Prices, shopping and the bank.", "Budget and spending."),
                ("钱、存款和账单。", "价格、购物和银行。", "预算和开销。")),
    "style": (("How the assistant should answer.", "Writing style and the length of replies.",
               "Texts and messages to write."), ("助手应该怎样回答。", "写作风格和回复的长短。", "要写的文字和消息。")),
    "knowledge": (("Science, history and geography.", "General knowledge and facts.",
                   "Maths, definitions and trivia."), ("科学、历史和地理。", "常识和事实。", "数学、定义和趣味知识。")),
}

# need: (what a question asks that needs it known, what a memory tells that answers it), both languages
NEEDS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "diet": (("What can I eat or drink?", "Is this dish or snack okay for me?",
              "Suggest a restaurant, a recipe or a menu.", "我能吃什么喝什么？", "这道菜或零食我能吃吗？", "推荐一家餐厅、一个菜谱或菜单。"),
             ("The user is allergic to a food.", "The user cannot eat or drink something.",
              "The user follows a special diet.", "用户对某种食物过敏。", "用户不能吃某些东西。", "用户有特殊的饮食习惯。")),
    "health": (("I have a symptom, is it serious?", "Can I take this medicine?", "Is this activity safe for my health?",
                "我有个症状，要紧吗？", "我能吃这个药吗？", "这个活动对我的健康安全吗？"),
               ("The user has a medical condition.", "The user takes medication.", "The user has a health problem.",
                "用户有慢性病。", "用户在吃药。", "用户有健康问题。")),
    "location": (("What's the weather like today?", "Find something near me.", "What's on in my city?",
                  "今天天气怎么样？", "帮我找附近的地方。", "我这个城市有什么活动？"),
                 ("The user lives in a city.", "The user's home is in a town.", "The user lives abroad.",
                  "用户住在某个城市。", "用户的家在某个地方。", "用户住在国外。")),
    "vehicle": (("My car needs a repair or new tyres.", "Where can I park or get fuel?", "How do I get to work?",
                 "我的车要修或换轮胎。", "去哪里停车或加油？", "我怎么去上班？"),
                ("The user drives a car.", "The user owns a vehicle.", "The user commutes by bike or car.",
                 "用户开车。", "用户有一辆车。", "用户骑车或开车上下班。")),
    "family": (("A gift or plan for someone in my family.", "How do I help my child, partner or parent?",
                "Visiting a relative.", "给家人的礼物或安排。", "我怎么帮我的孩子、伴侣或父母？", "去看望亲戚。"),
               ("The user has a family member.", "The user's relative lives somewhere.", "The user has children.",
                "用户有家人。", "用户的亲戚住在某地。", "用户有孩子。")),
    "work": (("A task, email or meeting at work.", "How do I deal with my job?", "Talking to my manager or colleagues.",
              "工作上的任务、邮件或会议。", "我的工作怎么处理？", "跟经理或同事沟通。"),
             ("The user has a job.", "The user works on a project.", "The user has a manager.",
              "用户有一份工作。", "用户负责一个项目。", "用户有上司。")),
    "routine": (("When should I sleep or get up?", "Can I fit this into my week?", "Book something at my usual time.",
                 "我该几点睡觉或起床？", "这周我能安排得下吗？", "在我平时的时间预约。"),
                ("The user has a daily routine.", "The user has a weekly appointment.", "The user gets up early.",
                 "用户有固定的作息。", "用户每周有固定安排。", "用户早起。")),
    "sport": (("How should I train or exercise?", "An injury or pain from sport.", "Sports gear and partners.",
               "我该怎么训练或锻炼？", "运动受伤或疼痛。", "运动装备和球友。"),
              ("The user plays a sport.", "The user trains regularly.", "The user goes to the gym.",
               "用户做某项运动。", "用户经常训练。", "用户去健身房。")),
    "hobby": (("Music, songs or an instrument.", "Practising a skill I am learning.",
               "Something to read, watch or listen to.", "音乐、歌曲或乐器。", "练习我在学的技能。", "看点、读点或听点什么。"),
              ("The user likes a kind of music.", "The user is learning something.", "The user has a hobby.",
               "用户喜欢某种音乐。", "用户在学习某样东西。", "用户有个爱好。")),
    "pets": (("Looking after my pet.", "My dog or cat has a problem.", "Feeding or walking my pet.",
              "照顾我的宠物。", "我的狗或猫有问题。", "喂宠物或遛宠物。"),
             ("The user has a pet.", "The user's pet has a name.", "The user's pet needs special care.",
              "用户养了宠物。", "用户的宠物有名字。", "用户的宠物需要特别照顾。")),
    "home": (("Something for my home or garden.", "Furniture, deliveries or moving house.",
              "Household chores and appliances.", "家里或花园要用的东西。", "家具、送货或搬家。", "家务和家电。"),
             ("The user lives in a flat or a house.", "The user has a garden.",
              "The user's home has a particular layout.", "用户住在公寓或房子里。", "用户有个园子。", "用户的住处有特别之处。")),
    "answers": (("Explain or summarise something for me.", "Write a text for me.", "Answer my question.",
                 "给我解释或总结一下。", "帮我写一段文字。", "回答我的问题。"),
                ("The user wants answers in a certain style.", "The user prefers a certain length of reply.",
                 "The user's name.", "用户希望用某种方式回答。", "用户喜欢某种长度的回复。", "用户的名字。")),
    "travel": (("Plan a trip or a journey.", "Flights, trains and hotels.", "Going abroad.",
                "规划旅行或行程。", "飞机、火车和酒店。", "出国。"),
               ("The user has a travel preference.", "The user speaks or learns a language.",
                "The user has a fear or limit when travelling.", "用户有出行偏好。", "用户会说或在学某种语言。", "用户出行时有顾虑或限制。")),
}

# The memory service's categories (docs/memory.md, "Categories"), described as that page does, and
# the bench's memories in them, given by hand as an extracting model would.
CATEGORIES: dict[str, tuple[tuple[str, ...], str]] = {
    "identity": (("The person's name, age, birthday and where they live.",
                  "Where someone lives: their city, home town and neighbourhood.",
                  "名字、年龄、生日和住在哪里。", "住在哪个城市、家乡和附近。"), "name berlin hometown"),
    "preference": (("Likes and dislikes, diet and taste.", "How they want answers; favourite food, music and hobbies.",
                    "喜好和厌恶、饮食和口味。", "希望怎样回答；喜欢的食物、音乐和爱好。"),
                   "coffee short_answers jazz spicy vegetarian tennis guitar learning_japanese"),
    "health": (("Allergies, illnesses and medication.", "Health conditions and what is safe to eat or do.",
                "过敏、疾病和药物。", "健康状况，能吃什么、能做什么。"),
               "peanuts asthma blood_pressure lactose glasses shellfish diabetes gluten back_pain flying"),
    "relationship": (("Family, friends, pets and their names.", "A spouse, children, parents or a pet.",
                      "家人、朋友、宠物和他们的名字。", "配偶、孩子、父母或宠物。"),
                     "sister daughter wife mother_birthday dog cat_food grandmother twins"),
    "work": (("The job, the employer and projects.", "Work, colleagues and the office.",
              "工作、雇主和项目。", "上班、同事和办公室。"), "nurse boss project cycling_commute"),
    "schedule": (("Routines and recurring appointments.", "The daily and weekly schedule.",
                  "日常习惯和定期的预约。", "每天和每周的日程。"), "gym wake dentist marathon"),
    "other": (("Other things about the person.", "Possessions, the home and everyday life.",
               "关于这个人的其他事情。", "物品、家和日常生活。"), "car flat garden"),
}

USE_SHARPER = 4.5    # USE's similarities spread about 4.5 times wider than e5's (plugins/memory/relevance.py)


@dataclass
class Texts:
    """Every question's and memory's vectors by both models, and a way to embed descriptions."""
    e5: dict[str, np.ndarray]       # questions as queries, memories as passages
    use: dict[str, np.ndarray]
    describe: Callable[[str, list[str]], np.ndarray]


async def embed_texts(scored: list[Scored]) -> Texts:
    embedder, second = LocalE5Embedder(), SecondOpinion()
    questions = sorted({s.pair.question for s in scored})
    memories = sorted({s.pair.memory for s in scored})
    e5 = {q: np.asarray(await embedder.embed_query(q), dtype=np.float32) for q in questions}
    e5.update(zip(memories, np.asarray(await embedder.embed_passages(memories), dtype=np.float32)))
    await second.prepare()
    with second.model.using() as encoder:
        use = dict(zip(questions + memories, np.asarray(encoder.encode(questions + memories), dtype=np.float32)))
    described: dict[str, dict[tuple[str, ...], np.ndarray]] = {"e5": {}, "use": {}}
    for texts in _every_description():
        described["e5"][texts] = np.asarray(await embedder.embed_passages(list(texts)), dtype=np.float32)
        with second.model.using() as encoder:
            described["use"][texts] = np.asarray(encoder.encode(list(texts)), dtype=np.float32)
    return Texts(e5, use, lambda model, texts: described[model][tuple(texts)])


def _every_description() -> list[tuple[str, ...]]:
    return [tuple(d for en, zh in TOPICS.values() for d in en + zh),
            tuple(d for asked, _ in NEEDS.values() for d in asked),
            tuple(d for _, told in NEEDS.values() for d in told),
            tuple(d for descriptions, _ in CATEGORIES.values() for d in descriptions)]


def _profile(texts: Texts, model: str, said: list[str], groups: list[tuple[str, ...]]) -> np.ndarray:
    """Each text's similarity to each group of descriptions (the best of the group)."""
    flat = tuple(d for group in groups for d in group)
    owner = np.array([i for i, group in enumerate(groups) for _ in group])
    vectors = getattr(texts, model)
    similarities = np.stack([vectors[text] for text in said]) @ texts.describe(model, list(flat)).T
    return np.stack([similarities[:, owner == i].max(1) for i in range(len(groups))], 1)


def _softmax(values: np.ndarray, temperature: float) -> np.ndarray:
    exp = np.exp((values - values.max(1, keepdims=True)) / temperature)
    normalised: np.ndarray = exp / exp.sum(1, keepdims=True)
    return normalised


def _both(texts: Texts, said: list[str], groups: list[tuple[str, ...]], temperature: float) -> np.ndarray:
    """The two models' softmaxed profiles, averaged (USE's sharper by its wider spread)."""
    averaged: np.ndarray = (_softmax(_profile(texts, "e5", said, groups), temperature)
                            + _softmax(_profile(texts, "use", said, groups), temperature / USE_SHARPER)) / 2
    return averaged


def signals(scored: list[Scored], texts: Texts) -> dict[str, Callable[[float], np.ndarray]]:
    """Each signal by its temperature: one value per pair, to be weighted and added."""
    questions = [s.pair.question for s in scored]
    memories = [s.pair.memory for s in scored]
    topics = [en + zh for en, zh in TOPICS.values()]
    asked = [group for group, _ in NEEDS.values()]
    told = [group for _, group in NEEDS.values()]
    every = {**MEMORIES, **FRESH_MEMORIES, **THIRD_MEMORIES, **FOURTH_MEMORIES}
    names = list(CATEGORIES)
    category = {text: names.index(name) for name, (_, keys) in CATEGORIES.items()
                for key in keys.split() for text in every[key]}
    of_memory = np.array([category[m] for m in memories])

    def profile_cosine(_: float) -> np.ndarray:
        total = np.zeros(len(scored))
        for model in ("e5", "use"):
            asked_profile, told_profile = (_profile(texts, model, said, topics) for said in (questions, memories))
            a = asked_profile - asked_profile.mean(1, keepdims=True)
            b = told_profile - told_profile.mean(1, keepdims=True)
            total += (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1) / 2
        return total

    return {
        "topics, dot product": lambda t: (_both(texts, questions, topics, t)
                                          * _both(texts, memories, topics, t)).sum(1),
        "topics, profiles' cosine": profile_cosine,
        "topics, same first topic": lambda t: (_both(texts, questions, topics, t).argmax(1)
                                               == _both(texts, memories, topics, t).argmax(1)).astype(float),
        "memory's category as a prior": lambda t: _both(texts, questions,
                                                        [d for d, _ in CATEGORIES.values()], t)[
                                                            np.arange(len(scored)), of_memory],
        "needs, dot product": lambda t: (_both(texts, questions, asked, t) * _both(texts, memories, told, t)).sum(1),
    }


def best_recall(scores: np.ndarray, relevant: np.ndarray, chosen: np.ndarray) -> tuple[float, float, float]:
    """The best recall at precision ≥ 0.9 over the chosen pairs, its floor and precision."""
    order = np.argsort(-scores[chosen])
    hits = relevant[chosen][order]
    kept_true = np.cumsum(hits)
    precision = kept_true / np.arange(1, len(hits) + 1)
    best = (0.0, float("inf"), 1.0)
    for i in range(len(hits)):   # a floor at each score (ties fall together)
        if precision[i] >= 0.9 and (i + 1 == len(hits) or scores[chosen][order][i + 1] < scores[chosen][order][i]):
            recall = kept_true[i] / hits.sum()
            if recall > best[0]:
                best = (float(recall), float(scores[chosen][order][i]), float(precision[i]))
    return best


def at_floor(scores: np.ndarray, relevant: np.ndarray, part: np.ndarray, floor: float) -> tuple[float, float]:
    kept = part & (scores >= floor)
    return float((kept & relevant).sum() / max(1, kept.sum())), float((kept & relevant).sum() / (part & relevant).sum())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fourth", action="store_true", help="read the 4th set for the best signal")
    args = parser.parse_args()
    scored = asyncio.run(score_pairs())
    texts = asyncio.run(embed_texts(scored))
    relevance = np.array([s.relevance for s in scored])
    relevant = np.array([s.pair.relevant for s in scored])
    fourth = np.array([s.pair.fourth for s in scored])
    chosen, earlier = ~fourth, ~fourth & ~np.array([s.pair.third for s in scored])
    recall, floor, precision = best_recall(relevance, relevant, chosen)
    print(f"today's relevance: recall {recall:.3f} at precision {precision:.3f}, floor {floor:+.4f} "
          "(the earlier parts and the 3rd set)")
    best = (recall, "", 0.0, 0.0, floor)
    for name, signal in signals(scored, texts).items():
        for temperature in ((0.005,) if name == "topics, profiles' cosine" else (0.005, 0.01, 0.02)):
            values = signal(temperature)   # the profiles' cosine has no temperature
            for weight in (0.002, 0.004, 0.008, 0.012, 0.016):
                recall, floor, precision = best_recall(relevance + weight * values, relevant, chosen)
                earlier_figures = at_floor(relevance + weight * values, relevant, earlier, floor)
                print(f"  {name:30s} T {temperature:<6} w {weight:<6} recall {recall:.3f} (precision "
                      f"{precision:.3f}, floor {floor:+.4f}; the earlier parts {earlier_figures[1]:.3f})")
                if recall > best[0]:
                    best = (recall, name, temperature, weight, floor)
    print(f"best: {best[1]}, T {best[2]}, w {best[3]}: recall {best[0]:.3f}, floor {best[4]:+.4f}")
    if args.fourth and best[1]:
        values = signals(scored, texts)[best[1]](best[2])
        print("4th set, today's relevance at 0.003: precision {:.3f} recall {:.3f}".format(
            *at_floor(relevance, relevant, fourth, 0.003)))
        print("4th set, the best signal at its floor: precision {:.3f} recall {:.3f}".format(
            *at_floor(relevance + best[3] * values, relevant, fourth, best[4])))


if __name__ == "__main__":
    main()
