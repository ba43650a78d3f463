"""Writes a tiny random-weights Llama GGUF for the test suite's llama-server.

2 layers, width 64, a byte-level BPE vocabulary (the 256 byte tokens and one merge
that no text here uses, so every byte is one token and a text's token count is its length in
bytes) plus the ChatML control tokens, and a ChatML chat template. The weights
are random from a fixed seed, so the file is the same on every machine; a GBNF
grammar in the request decides what the model writes.

usage: python llama_model.py OUT.gguf
"""

import sys

import numpy as np
import gguf

SEED = 20260715
N_EMBD = 64
N_LAYER = 2
N_HEAD = 4
N_FF = 128
N_CTX_TRAIN = 4096

CHATML = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def byte_tokens():
    """GPT-2's printable stand-ins for the 256 bytes, in byte order."""
    printable = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("\xa1"), ord("\xac") + 1))
        + list(range(ord("\xae"), ord("\xff") + 1))
    )
    chars = {}
    extra = 0
    for b in range(256):
        if b in printable:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + extra)
            extra += 1
    return [chars[b] for b in range(256)]


def main(out):
    rng = np.random.default_rng(SEED)
    nul = byte_tokens()[0]
    # llama.cpp refuses a BPE vocabulary without merges: one merge, of two
    # NUL bytes, which no prompt or reply here contains.
    tokens = byte_tokens() + [nul + nul, "<|im_start|>", "<|im_end|>", "<|endoftext|>"]
    types = [gguf.TokenType.NORMAL] * 257 + [gguf.TokenType.CONTROL] * 3
    im_start, im_end, eot = 257, 258, 259
    n_vocab = len(tokens)

    w = gguf.GGUFWriter(out, "llama")
    w.add_name("assay-test-tiny")
    w.add_context_length(N_CTX_TRAIN)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(N_LAYER)
    w.add_feed_forward_length(N_FF)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_HEAD)
    w.add_rope_dimension_count(N_EMBD // N_HEAD)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(n_vocab)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)

    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges([nul + " " + nul])
    w.add_bos_token_id(im_start)
    w.add_eos_token_id(im_end)
    w.add_eot_token_id(im_end)
    w.add_pad_token_id(eot)
    w.add_add_bos_token(False)
    w.add_chat_template(CHATML)

    def t(name, *shape):
        w.add_tensor(name, (rng.standard_normal(shape) * 0.02).astype(np.float32))

    t("token_embd.weight", n_vocab, N_EMBD)
    for i in range(N_LAYER):
        w.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(N_EMBD, dtype=np.float32))
        t(f"blk.{i}.attn_q.weight", N_EMBD, N_EMBD)
        t(f"blk.{i}.attn_k.weight", N_EMBD, N_EMBD)
        t(f"blk.{i}.attn_v.weight", N_EMBD, N_EMBD)
        t(f"blk.{i}.attn_output.weight", N_EMBD, N_EMBD)
        w.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(N_EMBD, dtype=np.float32))
        t(f"blk.{i}.ffn_gate.weight", N_FF, N_EMBD)
        t(f"blk.{i}.ffn_up.weight", N_FF, N_EMBD)
        t(f"blk.{i}.ffn_down.weight", N_EMBD, N_FF)
    w.add_tensor("output_norm.weight", np.ones(N_EMBD, dtype=np.float32))
    t("output.weight", n_vocab, N_EMBD)

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: llama_model.py OUT.gguf")
    main(sys.argv[1])
