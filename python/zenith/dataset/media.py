"""mindspore.dataset readers for image, audio and reading-comprehension corpora, from files
already on disk in each corpus's layout (nothing is downloaded): Caltech101, Caltech256,
RenderedSST2, Omniglot, SUN397, Food101, STL10, YesNo, LJSpeech, SpeechCommands, GTZAN,
CMUArctic and SQuAD.

Images are the file's bytes (uint8, 1-d) unless decode=True (HWC uint8 RGB, PNG or JPEG);
labels are int64 (MindSpore: uint32/int32); waveforms are float32 (channels, samples) in
[-1, 1) from 16-bit PCM WAV files."""

import glob
import json
import os
import re
import wave

import numpy as np

from zenith import _zenith as _C
from zenith.dataset.corpora import _rows, _splits

__all__ = ["Caltech101Dataset", "Caltech256Dataset", "RenderedSST2Dataset", "OmniglotDataset",
           "SUN397Dataset", "Food101Dataset", "STL10Dataset", "YesNoDataset",
           "LJSpeechDataset", "SpeechCommandsDataset", "GTZANDataset", "CMUArcticDataset",
           "SQuADDataset"]

_IMAGES = (".jpg", ".jpeg", ".png")


def _image(path, decode):
    with open(path, "rb") as f:
        data = f.read()
    if decode:
        return _C.data.decode_image(data, path, 3).asnumpy().copy()
    return np.frombuffer(data, np.uint8).copy()


def _files(folder, exts=_IMAGES):
    return sorted(p for p in glob.glob(os.path.join(folder, "*")) if p.lower().endswith(exts))


def _labelled(pairs, decode, opts, names=("image", "label")):
    rows = [(_image(p, decode), np.array(label, np.int64)) for p, label in pairs]
    return _rows(rows, list(names), **opts)


def _opts(num_samples, shuffle, num_shards, shard_id):
    return {"num_samples": num_samples, "shuffle": shuffle, "num_shards": num_shards,
            "shard_id": shard_id}


def Caltech256Dataset(dataset_dir, num_samples=None, num_parallel_workers=None, shuffle=None,
                      decode=False, sampler=None, num_shards=None, shard_id=None, cache=None):
    """Folders NNN.name/ of images: label NNN - 1."""
    folders = sorted(d for d in os.listdir(dataset_dir) if re.match(r"\d+\.", d))
    pairs = [(p, int(d.split(".")[0]) - 1) for d in folders
             for p in _files(os.path.join(dataset_dir, d))]
    return _labelled(pairs, decode, _opts(num_samples, shuffle, num_shards, shard_id))


def Caltech101Dataset(dataset_dir, target_type=None, num_samples=None, num_parallel_workers=None,
                      shuffle=None, decode=False, sampler=None, num_shards=None, shard_id=None):
    """101_ObjectCategories/<class>/ images (sorted classes, BACKGROUND_Google left out):
    columns image and category. target_type 'annotation' (the .mat outlines) is not
    supported."""
    if target_type not in (None, "category"):
        raise ValueError("Caltech101Dataset: only target_type='category' is supported (the "
                         "annotations are MATLAB files)")
    root = os.path.join(dataset_dir, "101_ObjectCategories")
    classes = sorted(d for d in os.listdir(root) if d != "BACKGROUND_Google")
    pairs = [(p, i) for i, c in enumerate(classes) for p in _files(os.path.join(root, c))]
    return _labelled(pairs, decode, _opts(num_samples, shuffle, num_shards, shard_id),
                     ("image", "category"))


def RenderedSST2Dataset(dataset_dir, usage=None, num_samples=None, num_parallel_workers=None,
                        shuffle=None, decode=False, sampler=None, num_shards=None,
                        shard_id=None, cache=None):
    """{train,val,test}/{negative,positive}/*.png: label 0 negative, 1 positive."""
    splits = _splits("RenderedSST2Dataset", usage, lambda u: [os.path.join(dataset_dir, u)],
                     ("train", "val", "test"))
    pairs = [(p, label) for s in splits for label, c in enumerate(("negative", "positive"))
             for p in _files(os.path.join(s, c))]
    return _labelled(pairs, decode, _opts(num_samples, shuffle, num_shards, shard_id))


def OmniglotDataset(dataset_dir, background=None, num_samples=None, num_parallel_workers=None,
                    shuffle=None, decode=False, sampler=None, num_shards=None, shard_id=None,
                    cache=None):
    """images_background/ (background True or None) and images_evaluation/ (False or None),
    <alphabet>/<character>/*.png: label the index of the (alphabet, character) pair."""
    parts = {True: ["images_background"], False: ["images_evaluation"],
             None: ["images_background", "images_evaluation"]}[background]
    pairs, label = [], 0
    for part in parts:
        root = os.path.join(dataset_dir, part)
        if not os.path.isdir(root):
            continue
        for alphabet in sorted(os.listdir(root)):
            for character in sorted(os.listdir(os.path.join(root, alphabet))):
                pairs += [(p, label) for p in _files(os.path.join(root, alphabet, character))]
                label += 1
    return _labelled(pairs, decode, _opts(num_samples, shuffle, num_shards, shard_id))


def SUN397Dataset(dataset_dir, num_samples=None, num_parallel_workers=None, shuffle=None,
                  decode=False, sampler=None, num_shards=None, shard_id=None, cache=None):
    """ClassName.txt lists the classes (/a/abbey ...); their folders hold the images."""
    with open(os.path.join(dataset_dir, "ClassName.txt"), encoding="utf-8") as f:
        classes = [line.strip() for line in f if line.strip()]
    pairs = [(p, i) for i, c in enumerate(classes)
             for p in _files(os.path.join(dataset_dir, c.lstrip("/")))]
    return _labelled(pairs, decode, _opts(num_samples, shuffle, num_shards, shard_id))


def Food101Dataset(dataset_dir, usage=None, num_samples=None, num_parallel_workers=None,
                   shuffle=None, decode=False, sampler=None, num_shards=None, shard_id=None,
                   cache=None):
    """meta/{train,test}.txt list class/id; images/class/id.jpg: columns image and label
    (the class name, str)."""
    rows = []
    for path in _splits("Food101Dataset", usage,
                        lambda u: [os.path.join(dataset_dir, "meta", f"{u}.txt")]):
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    name = line.strip()
                    rows.append((_image(os.path.join(dataset_dir, "images", name + ".jpg"),
                                        decode), np.array(name.split("/")[0])))
    return _rows(rows, ["image", "label"], num_samples, shuffle, num_shards, shard_id)


def STL10Dataset(dataset_dir, usage=None, num_samples=None, num_parallel_workers=None,
                 shuffle=None, sampler=None, num_shards=None, shard_id=None, cache=None):
    """{train,test,unlabeled}_X.bin (column-major 3x96x96 uint8) and *_y.bin (1-10): image
    (96x96x3) and label (0-9; -1 unlabeled). usage train, test, unlabeled, train+unlabeled or
    all."""
    usage = "all" if usage is None else usage
    parts = {"train": ["train"], "test": ["test"], "unlabeled": ["unlabeled"],
             "train+unlabeled": ["train", "unlabeled"],
             "all": ["train", "test", "unlabeled"]}.get(usage)
    if parts is None:
        raise ValueError(f"STL10Dataset: unknown usage {usage!r}")
    images, labels = [], []
    for part in parts:
        path = os.path.join(dataset_dir, f"{part}_X.bin")
        if usage == "all" and not os.path.exists(path):
            continue
        raw = np.fromfile(path, np.uint8).reshape(-1, 3, 96, 96)
        images.append(raw.transpose(0, 3, 2, 1))
        ys = os.path.join(dataset_dir, f"{part}_y.bin")
        labels.append(np.fromfile(ys, np.uint8).astype(np.int64) - 1 if part != "unlabeled"
                      else np.full(len(raw), -1, np.int64))
    from zenith.dataset import NumpySlicesDataset
    return NumpySlicesDataset({"image": np.concatenate(images), "label": np.concatenate(labels)},
                              num_samples=num_samples, shuffle=shuffle, num_shards=num_shards,
                              shard_id=shard_id)


def _wave(path):
    """(float32 (channels, samples) in [-1, 1), sample rate) of a 16-bit PCM WAV file."""
    with wave.open(path, "rb") as w:
        if w.getsampwidth() != 2:
            raise ValueError(f"{path}: only 16-bit PCM WAV files are supported")
        data = np.frombuffer(w.readframes(w.getnframes()), "<i2")
        channels, rate = w.getnchannels(), w.getframerate()
    return (data.reshape(-1, channels).T / 32768.0).astype(np.float32), np.array(rate, np.int64)


def YesNoDataset(dataset_dir, num_samples=None, num_parallel_workers=None, shuffle=None,
                 sampler=None, num_shards=None, shard_id=None, cache=None):
    """*.wav named by their 8 labels (0_1_0_0_1_0_1_1.wav): waveform, sample_rate, label."""
    rows = []
    for path in _files(dataset_dir, (".wav",)):
        labels = os.path.basename(path)[:-4].split("_")
        rows.append((*_wave(path), np.array([int(x) for x in labels], np.int64)))
    return _rows(rows, ["waveform", "sample_rate", "label"], num_samples, shuffle, num_shards,
                 shard_id)


def LJSpeechDataset(dataset_dir, num_samples=None, num_parallel_workers=None, shuffle=None,
                    sampler=None, num_shards=None, shard_id=None, cache=None):
    """metadata.csv (id|transcription|normalized) and wavs/id.wav."""
    rows = []
    with open(os.path.join(dataset_dir, "metadata.csv"), encoding="utf-8") as f:
        for line in f:
            if line.strip():
                key, text, normalized = (line.rstrip("\n").split("|") + [""])[:3]
                rows.append((*_wave(os.path.join(dataset_dir, "wavs", key + ".wav")),
                             np.array(text), np.array(normalized)))
    return _rows(rows, ["waveform", "sample_rate", "transcription", "normalized_transcription"],
                 num_samples, shuffle, num_shards, shard_id)


def SpeechCommandsDataset(dataset_dir, usage=None, num_samples=None, num_parallel_workers=None,
                          shuffle=None, sampler=None, num_shards=None, shard_id=None,
                          cache=None):
    """<label>/<speaker>_nohash_<n>.wav; testing_list.txt and validation_list.txt pick test and
    valid, the rest is train: waveform, sample_rate, label, speaker_id, utterance_number."""
    usage = "all" if usage is None else usage
    if usage not in ("train", "test", "valid", "all"):
        raise ValueError(f"SpeechCommandsDataset: unknown usage {usage!r}")

    def listed(name):
        path = os.path.join(dataset_dir, name)
        return set(open(path, encoding="utf-8").read().split()) if os.path.exists(path) else set()
    test, valid = listed("testing_list.txt"), listed("validation_list.txt")
    rows = []
    for label in sorted(os.listdir(dataset_dir)):
        folder = os.path.join(dataset_dir, label)
        if not os.path.isdir(folder) or label.startswith("_"):
            continue
        for path in _files(folder, (".wav",)):
            rel = f"{label}/{os.path.basename(path)}"
            split = "test" if rel in test else "valid" if rel in valid else "train"
            if usage in ("all", split):
                speaker, _, n = os.path.basename(path)[:-4].split("_")
                rows.append((*_wave(path), np.array(label), np.array(speaker),
                             np.array(int(n), np.int64)))
    return _rows(rows, ["waveform", "sample_rate", "label", "speaker_id", "utterance_number"],
                 num_samples, shuffle, num_shards, shard_id)


def GTZANDataset(dataset_dir, usage=None, num_samples=None, num_parallel_workers=None,
                 shuffle=None, sampler=None, num_shards=None, shard_id=None, cache=None):
    """<genre>/<genre>.NNNNN.wav: waveform, sample_rate, label (the genre). Only usage 'all'
    (None): the train/valid/test file lists are not built in."""
    if usage not in (None, "all"):
        raise ValueError("GTZANDataset: only usage='all' is supported")
    rows = [(*_wave(p), np.array(g)) for g in sorted(os.listdir(dataset_dir))
            if os.path.isdir(os.path.join(dataset_dir, g))
            for p in _files(os.path.join(dataset_dir, g), (".wav",))]
    return _rows(rows, ["waveform", "sample_rate", "label"], num_samples, shuffle, num_shards,
                 shard_id)


def CMUArcticDataset(dataset_dir, name=None, num_samples=None, num_parallel_workers=None,
                     shuffle=None, sampler=None, num_shards=None, shard_id=None, cache=None):
    """cmu_us_<name>_arctic/etc/txt.done.data and wav/<id>.wav (under dataset_dir or
    dataset_dir/ARCTIC): waveform, sample_rate, transcript, utterance_id."""
    folder = f"cmu_us_{name or 'aew'}_arctic"
    root = next((r for r in (os.path.join(dataset_dir, folder),
                             os.path.join(dataset_dir, "ARCTIC", folder)) if os.path.isdir(r)),
                None)
    if root is None:
        raise RuntimeError(f"CMUArcticDataset: no {folder} in {dataset_dir}")
    rows = []
    with open(os.path.join(root, "etc", "txt.done.data"), encoding="utf-8") as f:
        for line in f:
            m = re.match(r'\(\s*(\S+)\s+"(.*)"\s*\)', line.strip())
            if m:
                rows.append((*_wave(os.path.join(root, "wav", m.group(1) + ".wav")),
                             np.array(m.group(2)), np.array(m.group(1))))
    return _rows(rows, ["waveform", "sample_rate", "transcript", "utterance_id"], num_samples,
                 shuffle, num_shards, shard_id)


def SQuADDataset(dataset_dir, usage=None, num_samples=None, num_parallel_workers=None,
                 shuffle=None, num_shards=None, shard_id=None, cache=None):
    """train-v*.json / dev-v*.json: one row per question: context, question, text (the
    answers) and answer_start (int64 offsets)."""
    def files(u):
        prefix = "train" if u == "train" else "dev"
        return sorted(glob.glob(os.path.join(dataset_dir, f"{prefix}-v*.json"))) or [
            os.path.join(dataset_dir, f"{prefix}-v1.1.json")]
    rows = []
    for path in _splits("SQuADDataset", usage, files, ("train", "dev")):
        with open(path, encoding="utf-8") as f:
            articles = json.load(f)["data"]
        for article in articles:
            for para in article["paragraphs"]:
                for qa in para["qas"]:
                    answers = qa.get("answers", [])
                    rows.append((np.array(para["context"]), np.array(qa["question"]),
                                 np.array([a["text"] for a in answers] or [""]),
                                 np.array([a["answer_start"] for a in answers] or [-1],
                                          np.int64)))
    return _rows(rows, ["context", "question", "text", "answer_start"], num_samples, shuffle,
                 num_shards, shard_id)
