"""Golden models of the SmartNIC blocks of DLRM training (dissertation Chapter 5, Section 5.5).

:mod:`.cache` is the exact-LRU embedding cache (write-through), :mod:`.dedupe` the dedupe
kernel's segments, :mod:`.reduction` the local loss reduction's order, and :mod:`.traces` the
synthetic lookup traces of Table 5.1's datasets under a Zipf law; :mod:`.batching` is the graph
algorithm's mini-batching (Section 5.4, Algorithm 1).
"""

from .batching import graph_batches
from .cache import LruCache, hit_rate
from .dedupe import dedupe, segments
from .reduction import WORDS, add_words, reduce_gradients
from .traces import DATASETS, Dataset, lookup_trace, zipf_ranks

__all__ = ["LruCache", "hit_rate", "dedupe", "segments", "WORDS", "add_words", "reduce_gradients", "DATASETS",
           "Dataset", "lookup_trace", "zipf_ranks", "graph_batches"]
