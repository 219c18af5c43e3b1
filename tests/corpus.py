"""Plain NumPy programs in the style of public scientific code: buffers made with np.empty and
filled in place over time steps, column and row updates, fancy indexing. Nothing here knows
about toolkit; tests/test_corpus.py traces them unmodified and compares with NumPy."""
import numpy as np


def jacobi_2d(A, B, steps):
    for _ in range(steps):
        B[1:-1, 1:-1] = 0.2 * (
            A[1:-1, 1:-1] + A[1:-1, :-2] + A[1:-1, 2:] + A[2:, 1:-1] + A[:-2, 1:-1]
        )
        A[1:-1, 1:-1] = 0.2 * (
            B[1:-1, 1:-1] + B[1:-1, :-2] + B[1:-1, 2:] + B[2:, 1:-1] + B[:-2, 1:-1]
        )


def heat_3d(A, steps):
    B = np.empty_like(A)
    B[...] = A
    for _ in range(steps):
        B[1:-1, 1:-1, 1:-1] = (
            0.125 * (A[2:, 1:-1, 1:-1] - 2.0 * A[1:-1, 1:-1, 1:-1] + A[:-2, 1:-1, 1:-1])
            + 0.125 * (A[1:-1, 2:, 1:-1] - 2.0 * A[1:-1, 1:-1, 1:-1] + A[1:-1, :-2, 1:-1])
            + 0.125 * (A[1:-1, 1:-1, 2:] - 2.0 * A[1:-1, 1:-1, 1:-1] + A[1:-1, 1:-1, :-2])
            + A[1:-1, 1:-1, 1:-1]
        )
        A, B = B, A
    return A


def gram_schmidt(A):
    m, n = A.shape
    Q = np.zeros((m, n), dtype=A.dtype)
    R = np.zeros((n, n), dtype=A.dtype)
    for k in range(n):
        R[k, k] = np.sqrt(np.sum(A[:, k] * A[:, k]))
        Q[:, k] = A[:, k] / R[k, k]
        for j in range(k + 1, n):
            R[k, j] = np.dot(Q[:, k], A[:, j])
            A[:, j] = A[:, j] - Q[:, k] * R[k, j]
    return Q, R


def lu(A):
    n = A.shape[0]
    for i in range(n):
        for j in range(i):
            A[i, j] -= A[i, :j] @ A[:j, j]
            A[i, j] /= A[j, j]
        for j in range(i, n):
            A[i, j] -= A[i, :i] @ A[:i, j]


def cholesky(A):
    n = A.shape[0]
    L = np.zeros_like(A)
    for i in range(n):
        for j in range(i + 1):
            s = np.dot(L[i, :j], L[j, :j])
            if i == j:
                L[i, j] = np.sqrt(A[i, i] - s)
            else:
                L[i, j] = (A[i, j] - s) / L[j, j]
    return L


def covariance(data):
    float_n = data.shape[0]
    mean = np.mean(data, axis=0)
    data -= mean
    cov = np.empty((data.shape[1], data.shape[1]), dtype=data.dtype)
    for i in range(data.shape[1]):
        cov[i:, i] = cov[i, i:] = data[:, i] @ data[:, i:] / (float_n - 1.0)
    return cov


def histogram_counts(values, nbins):
    counts = np.zeros(nbins, dtype=np.int64)
    bins = np.clip((values * nbins).astype(np.int64), 0, nbins - 1)
    np.add.at(counts, bins, 1)
    last_wins = np.zeros(nbins, dtype=np.int64)
    last_wins[bins] += 1  # NumPy's buffered form: repeated bins count once
    return counts, last_wins


def conv2d_im2col(x, w, b):
    """x: (C, H, W), w: (F, C, K, K) -> (F, H-K+1, W-K+1), through an im2col index array."""
    C, H, W = x.shape
    F, _, K, _ = w.shape
    out_h, out_w = H - K + 1, W - K + 1
    i0 = np.repeat(np.arange(K), K)
    j0 = np.tile(np.arange(K), K)
    i1 = np.repeat(np.arange(out_h), out_w)
    j1 = np.tile(np.arange(out_w), out_h)
    rows = i0.reshape(-1, 1) + i1.reshape(1, -1)
    cols = j0.reshape(-1, 1) + j1.reshape(1, -1)
    patches = x[:, rows, cols].reshape(C * K * K, -1)
    out = w.reshape(F, -1) @ patches + b[:, None]
    return out.reshape(F, out_h, out_w)


def floyd_warshall(path):
    for k in range(path.shape[0]):
        path[:] = np.minimum(path[:], np.add.outer(path[:, k], path[k, :]))


def nbody_step(pos, vel, mass, dt):
    n = pos.shape[0]
    acc = np.empty_like(pos)
    for i in range(n):
        d = pos - pos[i]
        r2 = np.sum(d * d, axis=1) + 1e-3
        r2[i] = 1.0
        inv = mass / (r2 * np.sqrt(r2))
        inv[i] = 0.0
        acc[i] = np.sum(d * inv[:, None], axis=0)
    vel += acc * dt
    pos += vel * dt
    return pos, vel


# ---- a GPT-2 forward pass (picoGPT's, unmodified in substance) --------------------------------
def gelu(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))


def softmax(x):
    exp_x = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return exp_x / np.sum(exp_x, axis=-1, keepdims=True)


def layer_norm(x, g, b, eps: float = 1e-5):
    mean = np.mean(x, axis=-1, keepdims=True)
    variance = np.var(x, axis=-1, keepdims=True)
    x = (x - mean) / np.sqrt(variance + eps)
    return g * x + b


def linear(x, w, b):
    return x @ w + b


def ffn(x, c_fc, c_proj):
    a = gelu(linear(x, **c_fc))
    x = linear(a, **c_proj)
    return x


def attention(q, k, v, mask):
    return softmax(q @ k.T / np.sqrt(q.shape[-1]) + mask) @ v


def mha(x, c_attn, c_proj, n_head):
    x = linear(x, **c_attn)
    qkv = np.split(x, 3, axis=-1)
    qkv_heads = list(map(lambda x: np.split(x, n_head, axis=-1), qkv))
    causal_mask = (1 - np.tri(x.shape[0], dtype=x.dtype)) * -1e10
    out_heads = [attention(q, k, v, causal_mask) for q, k, v in zip(*qkv_heads)]
    x = np.hstack(out_heads)
    x = linear(x, **c_proj)
    return x


def transformer_block(x, mlp, attn, ln_1, ln_2, n_head):
    x = x + mha(layer_norm(x, **ln_1), **attn, n_head=n_head)
    x = x + ffn(layer_norm(x, **ln_2), **mlp)
    return x


def gpt2(inputs, wte, wpe, blocks, ln_f, n_head):
    x = wte[inputs] + wpe[range(len(inputs))]
    for block in blocks:
        x = transformer_block(x, **block, n_head=n_head)
    x = layer_norm(x, **ln_f)
    return x @ wte.T


def gpt2_params(rng, n_vocab=50, n_ctx=16, n_embd=32, n_head=4, n_layer=2):
    def dense(i, o):
        return {"w": rng.standard_normal((i, o)) * 0.1, "b": rng.standard_normal(o) * 0.1}

    def norm():
        return {"g": 1 + rng.standard_normal(n_embd) * 0.1, "b": rng.standard_normal(n_embd) * 0.1}

    blocks = [{"mlp": {"c_fc": dense(n_embd, 4 * n_embd), "c_proj": dense(4 * n_embd, n_embd)},
               "attn": {"c_attn": dense(n_embd, 3 * n_embd), "c_proj": dense(n_embd, n_embd)},
               "ln_1": norm(), "ln_2": norm()} for _ in range(n_layer)]
    return {
        "wte": rng.standard_normal((n_vocab, n_embd)) * 0.1,
        "wpe": rng.standard_normal((n_ctx, n_embd)) * 0.1,
        "blocks": blocks,
        "ln_f": norm(),
    }
