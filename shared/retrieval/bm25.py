"""BM25's constants, shared by the document side (`keywords`) and the reference IDF.

Memories are short and similar in length: the document side normalises by a fixed
average length instead of the store's (which would read other users' data), and the
reference IDF (`reference_idf`) models its corpus as documents of that length.
"""

BM25_K1 = 1.2
BM25_B = 0.75
BM25_AVG_LEN = 12.0
