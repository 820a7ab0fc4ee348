"""mindspore.dataset.text: PythonTokenizer, Vocab (from_list, from_dict, from_dataset) and
Lookup, for datasets of strings (GeneratorDataset over str items; see _python_rows.py).
String columns are numpy arrays of str (MindSpore's String tensors); Lookup gives int32 ids."""

from collections import Counter

import numpy as np

from zenith._tensor import Tensor, int32

__all__ = ["PythonTokenizer", "Vocab", "Lookup"]


class PythonTokenizer:
    """Splits each string with tokenizer(str) -> list of str."""

    def __init__(self, tokenizer):
        if not callable(tokenizer):
            raise TypeError("PythonTokenizer: tokenizer must be callable")
        self.tokenizer = tokenizer

    def __call__(self, value):
        return np.array(self.tokenizer(str(np.asarray(value).item())), dtype=str)


class Vocab:
    """word -> id (mindspore.dataset.text.Vocab)."""

    def __init__(self, words=None):
        self._ids = dict(words or {})

    @classmethod
    def from_list(cls, word_list, special_tokens=None, special_first=True):
        words = list(word_list)
        special = list(special_tokens or [])
        ordered = special + words if special_first else words + special
        if len(set(ordered)) != len(ordered):
            raise ValueError("Vocab.from_list: duplicate words")
        return cls({w: i for i, w in enumerate(ordered)})

    @classmethod
    def from_dict(cls, word_dict):
        return cls(dict(word_dict))

    @classmethod
    def from_dataset(cls, dataset, columns=None, freq_range=None, top_k=None,
                     special_tokens=None, special_first=True):
        """Words of the dataset's column (the first by default), most frequent first, equal
        frequencies in lexicographic order; freq_range=(min, max) keeps words counted within
        it, top_k the first k."""
        names = dataset.get_col_names()
        column = names[0] if columns is None else (
            columns if isinstance(columns, str) else list(columns)[0])
        index = names.index(column)
        counts = Counter()
        for row in dataset.create_tuple_iterator(output_numpy=True):
            counts.update(str(w) for w in np.asarray(row[index]).reshape(-1))
        lo, hi = freq_range or (None, None)
        words = sorted((w for w, c in counts.items() if (lo is None or c >= lo) and
                        (hi is None or c <= hi)), key=lambda w: (-counts[w], w))
        if top_k is not None:
            words = words[:top_k]
        return cls.from_list(words, special_tokens, special_first)

    def vocab(self):
        """The dict word -> id."""
        return dict(self._ids)

    def tokens_to_ids(self, tokens):
        if isinstance(tokens, str):
            return self._ids.get(tokens, -1)
        return [self._ids.get(t, -1) for t in tokens]

    def ids_to_tokens(self, ids):
        inverse = {i: w for w, i in self._ids.items()}
        if isinstance(ids, int):
            return inverse.get(ids, "")
        return [inverse.get(i, "") for i in ids]


class Lookup:
    """Words -> int32 ids; unknown_token (which must be in the vocab) replaces unknown words,
    else an unknown word is an error."""

    def __init__(self, vocab, unknown_token=None, data_type=int32):
        if not isinstance(vocab, Vocab):
            raise TypeError("Lookup: vocab must be a text.Vocab")
        self.vocab, self.unknown_token, self.data_type = vocab, unknown_token, data_type
        ids = vocab.vocab()
        if unknown_token is not None and unknown_token not in ids:
            raise ValueError(f"Lookup: unknown_token {unknown_token!r} is not in the vocab")

    def __call__(self, words):
        ids = self.vocab.vocab()
        out = []
        for w in np.asarray(words).reshape(-1):
            w = str(w)
            if w not in ids and self.unknown_token is None:
                raise ValueError(f"Lookup: {w!r} is not in the vocab and no unknown_token")
            out.append(ids.get(w, ids.get(self.unknown_token)))
        return Tensor(np.array(out, np.int32).reshape(np.asarray(words).shape),
                      self.data_type)

