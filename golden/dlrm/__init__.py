"""Golden models of the SmartNIC blocks of DLRM training (dissertation Chapter 5, Section 5.5).

:mod:`.cache` is the exact-LRU embedding cache (write-through), :mod:`.dedupe` the dedupe
kernel's segments, :mod:`.reduction` the local loss reduction's order, and :mod:`.traces` the
synthetic lookup traces of Table 5.1's datasets under a Zipf law; :mod:`.batching` is the graph
algorithm's mini-batching (Section 5.4, Algorithm 1); :mod:`.embedding_bag` is the embedding-bag
step (lookups in ``KeyedJaggedTensor`` layout pooled per bag, the per-row gradients through the
local and global reductions, and the SGD and row-wise AdaGrad row updates).
"""

from .batching import graph_batches
from .cache import LruCache, hit_rate
from .dedupe import dedupe, segments
from .embedding_bag import JaggedBatch, pool, row_gradients, rowwise_adagrad_rows, sgd_rows
from .reduction import WORDS, add_words, reduce_gradients
from .traces import DATASETS, Dataset, lookup_trace, zipf_ranks

__all__ = ["LruCache", "hit_rate", "dedupe", "segments", "WORDS", "add_words", "reduce_gradients", "DATASETS",
           "Dataset", "lookup_trace", "zipf_ranks", "graph_batches",
           "JaggedBatch", "pool", "row_gradients", "sgd_rows", "rowwise_adagrad_rows"]
