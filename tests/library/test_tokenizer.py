import pytest

from transformer_lib import BOS_ID, EOS_ID, PAD_ID, UNK_ID, Tokenizer, load_multi30k


@pytest.fixture(scope="module")
def corpus(mirror):
    return load_multi30k("train", "de")[:5000] + load_multi30k("train", "en")[:5000]


@pytest.fixture(scope="module")
def tokenizer(corpus):
    return Tokenizer.train(corpus, vocab_size=2000)


def test_special_token_ids_are_fixed(tokenizer):
    assert (PAD_ID, BOS_ID, EOS_ID, UNK_ID) == (0, 1, 2, 3)
    assert [tokenizer.id_to_piece(i) for i in range(4)] == ["<pad>", "<bos>", "<eos>", "<unk>"]
    ids = tokenizer.encode("Ein Hund.", bos=True, eos=True)
    assert ids[0] == BOS_ID and ids[-1] == EOS_ID and PAD_ID not in ids


def test_round_trip_on_real_sentences(tokenizer, mirror):
    # Held-out sentences: SentencePiece collapses runs of spaces, nothing else changes here.
    for sentence in load_multi30k("val", "de")[:300] + load_multi30k("val", "en")[:300]:
        ids = tokenizer.encode(sentence, bos=True, eos=True)
        assert tokenizer.decode(ids) == " ".join(sentence.split())


def test_unseen_character_becomes_unk(tokenizer):
    assert UNK_ID in tokenizer.encode("Ein Hund 犬")
    assert UNK_ID not in tokenizer.encode("Ein Hund")


def test_training_is_deterministic(tokenizer, corpus, tmp_path):
    again = Tokenizer.train(corpus, vocab_size=2000)
    sentence = "Zwei Männer spielen Fußball im Park."
    assert again.encode(sentence) == tokenizer.encode(sentence)
    tokenizer.save(tmp_path / "a.model")
    again.save(tmp_path / "b.model")
    assert (tmp_path / "a.model").read_bytes() == (tmp_path / "b.model").read_bytes()


def test_save_and_load(tokenizer, tmp_path):
    tokenizer.save(tmp_path / "sub" / "tok.model")
    loaded = Tokenizer.load(tmp_path / "sub" / "tok.model")
    assert loaded.vocab_size == tokenizer.vocab_size == 2000
    assert loaded.pieces("Ein Mann läuft.") == tokenizer.pieces("Ein Mann läuft.")
    assert [p.name for p in (tmp_path / "sub").iterdir()] == ["tok.model"]  # no temporary left


def test_bad_inputs_are_clear_errors(tokenizer, corpus, tmp_path):
    with pytest.raises(ValueError, match="outside the vocabulary"):
        tokenizer.decode([5, 2000])
    with pytest.raises(ValueError, match="model_type"):
        Tokenizer.train(corpus, vocab_size=100, model_type="word-piece")
    with pytest.raises(FileNotFoundError, match="no tokenizer at"):
        Tokenizer.load(tmp_path / "missing.model")
