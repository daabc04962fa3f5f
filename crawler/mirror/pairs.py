"""The pairs the mirror plants: hand-written (``HAND_PAIRS``), or a sample of the corpus read at
run time (``corpus_pairs``); no corpus text is in the repo.
"""

from __future__ import annotations

import gzip
import random
from pathlib import Path

from crawler.pipelines import invalid_reason, normalise_line
from data.paths import corpus_dir
from data.text import is_han

Pair = tuple[str, str]

# Written for this project, or folk couplets (春联 and the like) in the public domain.
HAND_PAIRS: list[Pair] = [
    ("天增岁月人增寿", "春满乾坤福满门"),
    ("春回大地千山秀", "日照神州万木荣"),
    ("一帆风顺年年好", "万事如意步步高"),
    ("绿柳舒眉辞旧岁", "红梅含笑迎新春"),
    ("瑞雪兆丰年", "东风迎新岁"),
    ("爆竹声声辞旧岁", "梅花点点报新春"),
    ("山清水秀风光好", "人寿年丰喜事多"),
    ("竹报平安", "花开富贵"),
    ("风调雨顺", "国泰民安"),
    ("书山有路勤为径", "学海无涯苦作舟"),
    ("海纳百川，有容乃大", "壁立千仞，无欲则刚"),
    ("风声雨声读书声，声声入耳", "家事国事天下事，事事关心"),
    ("雄鸡，鲤鱼，猪婆肉", "香菇，木耳，曲子耙"),
    ("松涛入梦清", "月色临窗静"),
    ("晨钟敲醒千山月", "暮鼓催开万户灯"),
    ("小院栽花香满径", "南窗读史墨盈池"),
    ("溪声洗尽尘中耳", "山色开扬眼底春"),
    ("一湖烟雨", "半岭松风"),
    ("桃李争春艳", "江山入画新"),
    ("柳岸莺啼三月暖", "荷塘蛙鼓五更凉"),
    ("闲来煮茗邀明月", "醉后题诗写白云"),
    ("古渡斜阳归客远", "长亭芳草故人稀"),
    ("半亩方塘开宝鉴", "一竿修竹拂青云"),
    ("秋水长天，雁字横空书远意", "春山细雨，燕泥衔梦筑新巢"),
    ("灯花结彩", "岁稔呈祥"),
    ("石上清泉流古调", "林间明月照新诗"),
    ("家和万事兴", "人勤百业旺"),
    ("梅开五福", "竹报三多"),
    ("登高望远天地阔", "种德修身日月长"),
    ("江南烟柳千重翠", "塞北风沙万里黄"),
    ("渔火数星江浦静", "钟声几杵寺门幽"),
    ("墨香盈室", "翠色满庭"),
    ("金鸡报晓", "紫燕衔春"),
    ("草色遥看近却无", "花光乍见浓如染"),
    ("门迎百福", "户纳千祥"),
    ("琴心剑胆", "月魄冰魂"),
    ("雨打芭蕉声碎玉", "风摇杨柳影流金"),
    ("一径苔痕侵屐齿", "半帘花影上书窗"),
    ("四海宾朋，同心共醉", "九州风雨，携手偕行"),
    ("青山不墨千秋画", "绿水无弦万古琴"),
    ("鸟语花香春意闹", "山明水秀画图新"),
    ("笔底烟霞生素纸", "胸中丘壑起高楼"),
    ("岁岁平安", "年年有余"),
    ("春风化雨", "桃李芬芳"),
    ("云开见日", "水落知源"),
    ("千年古镇镕新色", "百代长河涌大潮"),  # 镕: in GBK but not in GB2312
    ("杏坛传道", "桂苑育英"),
    ("夜雨剪春韭", "晨霜烹早茶"),
    ("一池荷叶衣无尽", "数亩松花食有余"),
    ("庭前花发三分艳", "案上书开一片香"),
    ("江上清风山间明月", "天边落日塞外孤烟"),
    ("万里江山如画", "一时人物风流"),
    ("竹影扫阶尘不动", "月轮穿沼水无痕"),
    ("春到人间草木知", "风来林下鸟雀喧"),
    ("浅草才能没马蹄", "深林犹可藏龙影"),
    ("红日初升千嶂晓", "白云深处一僧归"),
    ("宁静致远", "淡泊明志"),
    ("花间一壶酒", "月下半床书"),
    ("细雨湿衣看不见", "闲花落地听无声"),
    ("乾坤清气满", "日月大明新"),
]


def usable(pair: Pair) -> bool:
    """A pair the mirror can plant: valid, already normal, Han with at most ，、； between."""
    up, lo = pair
    return (
        invalid_reason(up, lo) is None
        and normalise_line(up) == up
        and normalise_line(lo) == lo
        and all(is_han(c) or c in "，、；" for c in up + lo)
    )


def corpus_pairs(n: int, seed: int = 0, path: Path | None = None) -> list[Pair] | None:
    """A random sample of n usable pairs from the corpus, or None when it is absent."""
    path = path or corpus_dir() / "wb14123_train.tsv.gz"
    if not path.exists():
        return None
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        lines = f.read().splitlines()
    sample: list[Pair] = []
    for i in random.Random(seed).sample(range(len(lines)), len(lines)):  # a shuffled order
        parts = lines[i].split("\t")
        if len(parts) == 2 and usable((parts[0], parts[1])):
            sample.append((parts[0], parts[1]))
            if len(sample) == n:
                break
    return sample
