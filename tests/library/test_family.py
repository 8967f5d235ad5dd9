"""Lesson 13's variants: GPT (causal), BERT (bidirectional, masking), the ViT, and their tasks."""

import pytest
import torch
import torch.nn.functional as F

from transformer_lib import BOS_ID, EOS_ID, PAD_ID, TrainConfig, Trainer, TransformerConfig, causal_mask
from transformer_lib.errors import InvalidValue
from transformer_lib.family.bert import BERT, MaskedLMTask, SequenceClassifier, mask_tokens
from transformer_lib.family.gpt import GPT, LanguageModelTask, generate
from transformer_lib.family.vit import VisionTransformer, ViTConfig, patchify
from transformer_lib.reference import torch_encoder
from transformer_lib.training import label_smoothed_cross_entropy
from transformer_lib.training.tasks import ClassificationTask, accuracy

VOCAB = 40


def config(**changes):
    base = dict(vocab_size=VOCAB, d_model=32, n_heads=4, n_layers=2, d_ff=64, dropout=0.0, max_len=32)
    return TransformerConfig(**{**base, **changes})


def tokens(batch=3, length=9, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(4, VOCAB, (batch, length), generator=g)


# -- GPT ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("norm_first", [False, True])
def test_gpt_never_sees_the_future(norm_first):
    torch.manual_seed(0)
    model = GPT(config(norm_first=norm_first)).eval()
    x = tokens()
    changed = x.clone()
    changed[:, 5:] = tokens(seed=1)[:, 5:]
    with torch.no_grad():
        a, b = model(x), model(changed)
    torch.testing.assert_close(a[:, :5], b[:, :5])
    assert not torch.allclose(a[:, 5:], b[:, 5:])


def test_gpt_gradient_reaches_only_the_past():
    torch.manual_seed(0)
    model = GPT(config()).eval()
    x = model.positional(model.embed(tokens(batch=1))).detach().requires_grad_(True)
    out = model.blocks(x, causal_mask(9))
    (out[0, 4] * torch.randn(32)).sum().backward()  # a plain sum of a LayerNorm output is constant
    reached = x.grad[0].abs().sum(dim=-1)
    assert (reached[:5] > 0).all() and (reached[5:] == 0).all()


@pytest.mark.parametrize("norm_first", [False, True])
def test_gpt_stack_equals_torch_encoder_with_a_causal_mask(norm_first):
    torch.manual_seed(0)
    model = GPT(config(norm_first=norm_first, activation="gelu")).eval()
    x = torch.randn(2, 7, 32)
    expected = torch_encoder(model.blocks).eval()(x, mask=~causal_mask(7)[0, 0])
    torch.testing.assert_close(model.blocks(x, causal_mask(7)), expected, atol=1e-5, rtol=1e-5)


def test_language_model_loss_counts_every_next_token():
    torch.manual_seed(0)
    model = GPT(config()).eval()
    seqs = [[BOS_ID, 5, 6, 7, EOS_ID], [BOS_ID, 8, EOS_ID]]
    task = LanguageModelTask(seqs, seqs, max_tokens=64)
    batch = task.make_batch([0, 1], train=True)
    loss, items = task.loss(model, batch, train=True)
    assert items == 4 + 2
    logits = model(batch[:, :-1])
    expected = label_smoothed_cross_entropy(logits, batch[:, 1:], smoothing=0.0, reduction="sum")
    torch.testing.assert_close(loss, expected)


def test_generate_greedy_is_the_argmax_and_stops_at_eos():
    torch.manual_seed(0)
    model = GPT(config()).eval()
    prompt = torch.tensor([[BOS_ID, 5]])
    out = generate(model, prompt, max_new=6, greedy=True)[0]
    seq = prompt
    for _ in range(6):  # by hand
        logits = model(seq)[:, -1]
        logits[:, [PAD_ID, BOS_ID]] = float("-inf")
        nxt = logits.argmax(-1, keepdim=True)
        if int(nxt) == EOS_ID:
            break
        seq = torch.cat([seq, nxt], dim=1)
    assert out == seq[0, 2:].tolist()
    assert EOS_ID not in out


def test_generate_rejects_bad_settings():
    model = GPT(config())
    with pytest.raises(InvalidValue, match="temperature must be positive"):
        generate(model, torch.tensor([[BOS_ID]]), temperature=0)
    with pytest.raises(InvalidValue, match="prompt must be"):
        generate(model, torch.tensor([BOS_ID]))


# -- BERT ---------------------------------------------------------------------------------------
def test_bert_sees_both_directions_and_ignores_padding():
    torch.manual_seed(0)
    model = BERT(config()).eval()
    x = tokens()
    changed = x.clone()
    changed[:, -1] = 5 + (x[:, -1] - 4 + 1) % (VOCAB - 5)  # another token at the last position
    padded = torch.cat([x, torch.full((3, 4), PAD_ID)], dim=1)
    with torch.no_grad():
        a, b, c = model.encode(x), model.encode(changed), model.encode(padded)
    assert not torch.allclose(a[:, 0], b[:, 0])  # the first position saw the last
    torch.testing.assert_close(c[:, :9], a, atol=1e-5, rtol=1e-5)


def test_bert_encoder_equals_torch_encoder_with_a_padding_mask():
    torch.manual_seed(0)
    model = BERT(config(norm_first=True)).eval()
    x = tokens()
    x[0, 5:] = PAD_ID
    with torch.no_grad():
        got = model.encode(x)
        expected = torch_encoder(model.blocks).eval()(
            model.positional(model.embed(x)), src_key_padding_mask=x == PAD_ID
        )
    keep = x != PAD_ID
    torch.testing.assert_close(got[keep], expected[keep], atol=1e-5, rtol=1e-5)


def test_mask_tokens_follows_the_80_10_10_rule():
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, 1000, (200, 500), generator=g)
    protected = [0, 1, 2, 3, 4, 5]
    inputs, labels = mask_tokens(x, mask_id=5, vocab_size=1000, protected=protected, generator=g)
    chosen = labels != PAD_ID
    ordinary = ~torch.isin(x, torch.tensor(protected))
    assert not (chosen & ~ordinary).any()  # special ids are never chosen
    assert abs(chosen.sum() / ordinary.sum() - 0.15) < 0.005
    assert torch.equal(labels[chosen], x[chosen])
    assert torch.equal(inputs[~chosen], x[~chosen])
    masked = (inputs == 5) & chosen
    kept = (inputs == x) & chosen
    replaced = chosen & ~masked & ~kept
    n = chosen.sum()
    assert abs(masked.sum() / n - 0.8) < 0.01
    assert abs(replaced.sum() / n - 0.1) < 0.01  # a random token may equal the original: kept counts ~10.1 %
    assert abs(kept.sum() / n - 0.1) < 0.01
    assert (inputs[replaced] > max(protected)).all()


def test_masked_lm_task_masks_a_batch_the_same_way_every_time():
    seqs = [[6, *range(7, 30)] for _ in range(8)]
    task = MaskedLMTask(seqs, seqs, mask_id=5, vocab_size=VOCAB, protected=range(6), max_tokens=256)
    a, b = task.make_batch([0, 1, 2], train=True), task.make_batch([0, 1, 2], train=True)
    assert torch.equal(a.inputs, b.inputs) and torch.equal(a.labels, b.labels)  # a resumed run sees the same masks
    assert not torch.equal(a.labels, task.make_batch([1, 0, 2], train=True).labels)  # another batch, other masks
    torch.manual_seed(0)
    loss, items = task.loss(BERT(config()), a, train=True)
    assert items == int((a.labels != PAD_ID).sum()) > 0 and loss > 0


def test_classifier_reads_the_first_position():
    torch.manual_seed(0)
    clf = SequenceClassifier(BERT(config()), n_classes=3).eval()
    x = tokens()
    with torch.no_grad():
        expected = clf.head(clf.encoder.encode(x)[:, 0])
        torch.testing.assert_close(clf(x), expected)


# -- the ViT ------------------------------------------------------------------------------------
def test_patchify_by_hand():
    image = torch.arange(16.0).reshape(1, 1, 4, 4)
    patches = patchify(image, 2)
    assert patches.tolist() == [[[0, 1, 4, 5], [2, 3, 6, 7], [8, 9, 12, 13], [10, 11, 14, 15]]]


def test_vit_every_patch_reaches_the_class_token_and_bad_images_are_refused():
    torch.manual_seed(0)
    model = VisionTransformer(ViTConfig(dropout=0.0)).eval()
    images = torch.rand(2, 1, 8, 8)
    changed = images.clone()
    changed[:, :, 7, 7] += 1.0  # the last patch only
    with torch.no_grad():
        assert model(images).shape == (2, 10)
        assert not torch.allclose(model(images), model(changed))
    with pytest.raises(InvalidValue, match=r"images must be \(batch, 1, 8, 8\)"):
        model(torch.rand(2, 8, 8))
    with pytest.raises(InvalidValue, match="must divide"):
        ViTConfig(patch_size=3)


# -- classification and the one Trainer ---------------------------------------------------------
def test_classification_task_batches_and_loss():
    x = torch.tensor([[6, 7, PAD_ID, PAD_ID], [6, PAD_ID, PAD_ID, PAD_ID], [6, 7, 8, PAD_ID]])
    y = torch.tensor([0, 1, 1])
    task = ClassificationTask(x, y, x, y, batch_size=2, seed=0)
    batches = task.train_batches(0)
    assert sorted(i for b in batches for i in b) == [0, 1, 2] and [len(b) for b in batches] == [2, 1]
    assert task.make_batch([0, 1], train=True).inputs.shape == (2, 2)  # padding-only columns dropped
    torch.manual_seed(0)
    clf = SequenceClassifier(BERT(config()), 2).eval()
    batch = task.make_batch([0, 1, 2], train=False)
    loss, items = task.loss(clf, batch, train=False)
    torch.testing.assert_close(loss, F.cross_entropy(clf(batch.inputs), y, reduction="sum"))
    assert items == 3
    with pytest.raises(InvalidValue, match="pairs of equal length"):
        ClassificationTask(x, y[:2])


def test_accuracy_by_hand():
    class Fixed(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(1))

        def forward(self, x):
            return F.one_hot(x[:, 0], 3).float()

    assert accuracy(Fixed(), torch.tensor([[0], [1], [2], [2]]), torch.tensor([0, 1, 1, 2])) == 0.75


def test_the_one_trainer_fits_a_language_model():
    seqs = [[BOS_ID, *([7, 8, 9] * 3), EOS_ID]] * 16
    torch.manual_seed(0)
    model = GPT(config())
    history = Trainer(
        # a tenth of the schedule's rate: at full rate (0.056 at d_model 32, warm-up 10) the loss
        # oscillates, and whether the last step lands on the pattern depended on the thread count
        model,
        LanguageModelTask(seqs, max_tokens=64),
        TrainConfig(epochs=30, warmup=10, lr_factor=0.1, progress=False),
    ).train()
    assert history[-1]["loss"] < 0.05 * history[0]["loss"]
    assert generate(model, torch.tensor([[BOS_ID, 7]]), greedy=True)[0][:5] == [8, 9, 7, 8, 9]


def test_tokenizer_extra_symbols_follow_the_special_ids():
    from transformer_lib.tokenizer import Tokenizer

    text = ["a man rides a horse", "two dogs play in the snow", "a woman sings"] * 20
    tok = Tokenizer.train(text, 40, extra_symbols=("<cls>", "<mask>"))
    assert (tok.piece_to_id("<cls>"), tok.piece_to_id("<mask>")) == (4, 5)
    assert 5 in tok.encode("a <mask> sings")
