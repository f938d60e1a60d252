"""Chinese keyword tokens are jieba's exact-mode cut (HMM on), from any number of threads.

Stored keyword vectors hold hashes of these tokens, so a segmenter that cut differently
would silently stop matching stored memories until `memoryd reindex`. The expected tokens
below were recorded from Python jieba 0.42 (`jieba.lcut`), which memoryd used before
jieba-rs; jieba-rs gave the same tokens on every Chinese text of MADial-zh and the hostile
corpus.
"""

from __future__ import annotations

import threading

from memoryd.retrieval.keywords import tokenize

JIEBA_TOKENS = {
    "我去年搬到了杭州，在一家设计公司上班。":
        ["去年", "搬到", "杭州", "一家", "设计", "公司", "上班"],
    "周末喜欢和朋友去西湖边散步，偶尔也会去爬山。":
        ["周末", "喜欢", "朋友", "去", "西湖", "边", "散步", "偶尔", "会", "去", "爬山"],
    "小明硕士毕业于中国科学院计算所": ["小明", "硕士", "毕业", "中国科学院", "计算所"],
    "我们中出了一个叛徒": ["中出", "叛徒"],
    "南京市长江大桥": ["南京市", "长江大桥"],
    # 拉麵 is not in the dictionary: the HMM decides, and cuts it.
    "她下个月要去東京看櫻花，还想吃拉麵":
        ["下个月", "要", "去", "東京", "看", "櫻花", "想", "吃", "拉", "麵"],
}


def test_chinese_tokens_are_jiebas_exact_cut() -> None:
    assert {text: tokenize(text) for text in JIEBA_TOKENS} == JIEBA_TOKENS


def test_chinese_tokens_from_many_threads_match() -> None:
    # The segmenter releases the GIL while it cuts: threads really run it at once here.
    texts = [text * n for n in (1, 7, 40) for text in JIEBA_TOKENS]
    expected = {text: tokenize(text) for text in texts}
    wrong: list[str] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(8)

    def cut_all(offset: int) -> None:
        barrier.wait()
        try:
            for _ in range(5):
                for text in texts[offset:] + texts[:offset]:
                    if tokenize(text) != expected[text]:
                        wrong.append(text)
        except BaseException as exc:  # collected: an error in a thread must fail the test
            errors.append(exc)

    threads = [threading.Thread(target=cut_all, args=(i * 3,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert wrong == []
