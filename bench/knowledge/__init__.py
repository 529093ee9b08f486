"""Knowledge-base retrieval benchmark: quality (nDCG@10, Recall@10) of lexical, dense and hybrid
search on the shared evaluation sets, and search latency over 20,000 chunks."""
