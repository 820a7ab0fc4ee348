"""zenith.llm: reserved for the LLaMA family and fine-tuning; until their bindings exist every
name in it says so."""

import pytest

import zenith


def test_llm_is_reserved():
    assert zenith.llm.__all__ == []
    with pytest.raises(NotImplementedError, match="not built yet"):
        zenith.llm.AutoModel
    assert not hasattr(zenith.llm, "Tokenizer")  # an AttributeError too
    assert "MindFormers" in zenith.llm.__doc__
