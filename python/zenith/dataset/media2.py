"""More mindspore.dataset corpus readers, from files on disk in each corpus's layout: CelebA,
Flickr, SBU, Manifest, DIV2K, Places365, COCO (detection), VOC, KITTI, LibriTTS, WIDER
Face, Cityscapes, CLUE (AFQMC, TNEWS, IFLYTEK, CMNLI) and
TFRecordDataset (tf.train.Example records; CRCs are not verified, compression is not
supported). Images are the file's bytes unless decode=True; labels are int64."""

import glob
import json
import os
import struct
import xml.etree.ElementTree as ET

import numpy as np

from zenith.dataset.corpora import _rows
from zenith.dataset.media import _image, _wave

__all__ = ["CelebADataset", "FlickrDataset", "SBUDataset", "ManifestDataset", "DIV2KDataset",
           "Places365Dataset", "CocoDataset", "VOCDataset", "KITTIDataset", "LibriTTSDataset",
           "TFRecordDataset", "WIDERFaceDataset", "CityscapesDataset", "CLUEDataset"]


def _lines(path):
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f if line.strip()]


def CelebADataset(dataset_dir, num_parallel_workers=None, shuffle=None, usage="all",
                  sampler=None, decode=False, extensions=None, num_samples=None,
                  num_shards=None, shard_id=None, cache=None):
    """img_align_celeba/ images, list_attr_celeba.txt (-1/1 -> 0/1) and, for usage train,
    valid or test, list_eval_partition.txt: columns image and attr."""
    lines = _lines(os.path.join(dataset_dir, "list_attr_celeba.txt"))[2:]
    split = None
    if usage != "all":
        want = {"train": "0", "valid": "1", "test": "2"}[usage]
        split = {name for name, part in (line.split() for line in _lines(
            os.path.join(dataset_dir, "list_eval_partition.txt"))) if part == want}
    rows = []
    for line in lines:
        name, *attrs = line.split()
        if split is None or name in split:
            rows.append((_image(os.path.join(dataset_dir, "img_align_celeba", name), decode),
                         (np.array([int(a) for a in attrs]) > 0).astype(np.int64)))
    return _rows(rows, ["image", "attr"], num_samples, shuffle, num_shards, shard_id)


def FlickrDataset(dataset_dir, annotation_file, num_samples=None, num_parallel_workers=None,
                  shuffle=None, decode=None, sampler=None, num_shards=None, shard_id=None,
                  cache=None):
    """Flickr8k/30k: annotation lines 'name.jpg#k<TAB>caption'; columns image and annotation
    (the image's captions)."""
    captions = {}
    for line in _lines(annotation_file):
        key, caption = line.split("\t", 1)
        captions.setdefault(key.split("#")[0], []).append(caption)
    rows = [(_image(os.path.join(dataset_dir, name), bool(decode)), np.array(caps))
            for name, caps in captions.items()]
    return _rows(rows, ["image", "annotation"], num_samples, shuffle, num_shards, shard_id)


def SBUDataset(dataset_dir, num_samples=None, num_parallel_workers=None, shuffle=None,
               decode=False, sampler=None, num_shards=None, shard_id=None, cache=None):
    """SBU_captioned_photo_dataset_{urls,captions}.txt and sbu_images/<url's file name>
    (rows whose image is present): columns image and caption."""
    urls = _lines(os.path.join(dataset_dir, "SBU_captioned_photo_dataset_urls.txt"))
    caps = _lines(os.path.join(dataset_dir, "SBU_captioned_photo_dataset_captions.txt"))
    rows = []
    for url, cap in zip(urls, caps):
        path = os.path.join(dataset_dir, "sbu_images", url.strip().split("/")[-1])
        if os.path.exists(path):
            rows.append((_image(path, decode), np.array(cap.strip())))
    return _rows(rows, ["image", "caption"], num_samples, shuffle, num_shards, shard_id)


def ManifestDataset(dataset_file, usage="train", num_samples=None, num_parallel_workers=None,
                    shuffle=None, sampler=None, class_indexing=None, decode=False,
                    num_shards=None, shard_id=None, cache=None):
    """JSON lines {"source", "usage", "annotation": [{"name"}]}: columns image and label
    (class_indexing, or the sorted class names -> 0, 1, ...)."""
    items = [json.loads(line) for line in _lines(dataset_file)]
    items = [i for i in items if i.get("usage", "train").lower() == usage]
    names = sorted({a["name"] for i in items for a in i.get("annotation", [])})
    index = class_indexing or {n: k for k, n in enumerate(names)}
    rows = [(_image(i["source"], decode),
             np.array([index[a["name"]] for a in i.get("annotation", [])], np.int64))
            for i in items]
    return _rows(rows, ["image", "label"], num_samples, shuffle, num_shards, shard_id)


def DIV2KDataset(dataset_dir, usage="train", downgrade="bicubic", scale=2, num_samples=None,
                 num_parallel_workers=None, shuffle=None, decode=False, sampler=None,
                 num_shards=None, shard_id=None, cache=None):
    """DIV2K_<usage>_HR/NNNN.png and DIV2K_<usage>_LR_<downgrade>/X<scale>/NNNNx<scale>.png:
    columns hr_image and lr_image."""
    hr = sorted(glob.glob(os.path.join(dataset_dir, f"DIV2K_{usage}_HR", "*.png")))
    lr_dir = os.path.join(dataset_dir, f"DIV2K_{usage}_LR_{downgrade}", f"X{scale}")
    rows = [(_image(p, decode), _image(os.path.join(
        lr_dir, os.path.basename(p)[:-4] + f"x{scale}.png"), decode)) for p in hr]
    return _rows(rows, ["hr_image", "lr_image"], num_samples, shuffle, num_shards, shard_id)


def Places365Dataset(dataset_dir, usage="train-standard", small=True, decode=False,
                     num_samples=None, num_parallel_workers=None, shuffle=None, sampler=None,
                     num_shards=None, shard_id=None, cache=None):
    """places365_train_standard.txt / _train_challenge.txt / _val.txt ('path label') with the
    images under data_256 (small) or data_large, val_256 or val_large: image and label."""
    name = {"train-standard": "places365_train_standard.txt",
            "train-challenge": "places365_train_challenge.txt", "val": "places365_val.txt"}
    folder = ("val" if usage == "val" else "data") + ("_256" if small else "_large")
    rows = []
    for line in _lines(os.path.join(dataset_dir, name[usage])):
        rel, label = line.rsplit(" ", 1)
        rows.append((_image(os.path.join(dataset_dir, folder, rel.lstrip("/")), decode),
                     np.array(int(label), np.int64)))
    return _rows(rows, ["image", "label"], num_samples, shuffle, num_shards, shard_id)


def CocoDataset(dataset_dir, annotation_file, task="Detection", num_samples=None,
                num_parallel_workers=None, shuffle=None, decode=False, sampler=None,
                num_shards=None, shard_id=None, cache=None, extra_metadata=False,
                decrypt=None):
    """COCO instances JSON, task Detection: image, bbox (float32 N x 4, x y w h), category_id
    and iscrowd (int64 N x 1)."""
    if task != "Detection":
        raise ValueError(f"CocoDataset: only task='Detection' is supported, got {task!r}")
    with open(annotation_file, encoding="utf-8") as f:
        doc = json.load(f)
    by_image = {}
    for a in doc.get("annotations", []):
        by_image.setdefault(a["image_id"], []).append(a)
    rows = []
    for img in doc["images"]:
        anns = by_image.get(img["id"], [])
        rows.append((_image(os.path.join(dataset_dir, img["file_name"]), decode),
                     np.array([a["bbox"] for a in anns], np.float32).reshape(-1, 4),
                     np.array([[a["category_id"]] for a in anns], np.int64).reshape(-1, 1),
                     np.array([[a.get("iscrowd", 0)] for a in anns], np.int64).reshape(-1, 1)))
    return _rows(rows, ["image", "bbox", "category_id", "iscrowd"], num_samples, shuffle,
                 num_shards, shard_id)


def VOCDataset(dataset_dir, task="Segmentation", usage="train", class_indexing=None,
               num_samples=None, num_parallel_workers=None, shuffle=None, decode=False,
               sampler=None, num_shards=None, shard_id=None, cache=None, extra_metadata=False,
               decrypt=None):
    """Pascal VOC: ImageSets/<Main|Segmentation>/<usage>.txt ids and JPEGImages/<id>.jpg;
    Detection: Annotations/<id>.xml -> bbox (float32 N x 4, xmin ymin w h), label,
    difficult, truncated (int64 N x 1; label from class_indexing or the sorted names);
    Segmentation: SegmentationClass/<id>.png -> target."""
    sets = "Main" if task == "Detection" else "Segmentation"
    ids = _lines(os.path.join(dataset_dir, "ImageSets", sets, f"{usage}.txt"))
    image = lambda i: _image(os.path.join(dataset_dir, "JPEGImages", f"{i}.jpg"), decode)
    if task == "Segmentation":
        rows = [(image(i), _image(os.path.join(dataset_dir, "SegmentationClass", f"{i}.png"),
                                  decode)) for i in ids]
        return _rows(rows, ["image", "target"], num_samples, shuffle, num_shards, shard_id)
    if task != "Detection":
        raise ValueError(f"VOCDataset: task must be 'Detection' or 'Segmentation', got {task!r}")
    objects = {i: ET.parse(os.path.join(dataset_dir, "Annotations", f"{i}.xml")).findall(
        "object") for i in ids}
    names = sorted({o.findtext("name") for objs in objects.values() for o in objs})
    index = class_indexing or {n: k for k, n in enumerate(names)}
    rows = []
    for i in ids:
        boxes, labels, difficult, truncated = [], [], [], []
        for o in objects[i]:
            b = [float(o.find("bndbox").findtext(k)) for k in ("xmin", "ymin", "xmax", "ymax")]
            boxes.append([b[0], b[1], b[2] - b[0], b[3] - b[1]])
            labels.append([index[o.findtext("name")]])
            difficult.append([int(o.findtext("difficult") or 0)])
            truncated.append([int(o.findtext("truncated") or 0)])
        rows.append((image(i), np.array(boxes, np.float32).reshape(-1, 4),
                     *(np.array(v, np.int64).reshape(-1, 1) for v in (labels, difficult,
                                                                      truncated))))
    return _rows(rows, ["image", "bbox", "label", "difficult", "truncated"], num_samples,
                 shuffle, num_shards, shard_id)


_KITTI = ["Car", "Van", "Truck", "Pedestrian", "Person_sitting", "Cyclist", "Tram", "Misc",
          "DontCare"]


def KITTIDataset(dataset_dir, usage="train", num_samples=None, num_parallel_workers=None,
                 shuffle=None, decode=False, sampler=None, num_shards=None, shard_id=None,
                 cache=None):
    """data_object_image_2/training/image_2/*.png and data_object_label_2/training/label_2/
    *.txt: image, label (class index), truncated, occluded, alpha, bbox, dimensions, location,
    rotation_y."""
    if usage != "train":
        raise ValueError("KITTIDataset: only usage='train' has labels")
    images = sorted(glob.glob(os.path.join(dataset_dir, "data_object_image_2", "training",
                                           "image_2", "*.png")))
    rows = []
    for path in images:
        stem = os.path.basename(path)[:-4]
        objs = [line.split() for line in _lines(os.path.join(
            dataset_dir, "data_object_label_2", "training", "label_2", f"{stem}.txt"))]
        num = np.array([[float(x) for x in o[1:15]] for o in objs], np.float32).reshape(-1, 14)
        rows.append((_image(path, decode),
                     np.array([[_KITTI.index(o[0])] for o in objs], np.int64).reshape(-1, 1),
                     num[:, 0:1], num[:, 1:2].astype(np.int64), num[:, 2:3], num[:, 3:7],
                     num[:, 7:10], num[:, 10:13], num[:, 13:14]))
    return _rows(rows, ["image", "label", "truncated", "occluded", "alpha", "bbox",
                        "dimensions", "location", "rotation_y"], num_samples, shuffle,
                 num_shards, shard_id)


def LibriTTSDataset(dataset_dir, usage=None, num_samples=None, num_parallel_workers=None,
                    shuffle=None, sampler=None, num_shards=None, shard_id=None, cache=None):
    """LibriTTS/<usage>/<speaker>/<chapter>/<id>.wav with <id>.original.txt and
    .normalized.txt: waveform, sample_rate, original_text, normalized_text, speaker_id,
    chapter_id, utterance_id."""
    root = os.path.join(dataset_dir, "LibriTTS")
    parts = [usage] if usage not in (None, "all") else sorted(os.listdir(root))
    rows = []
    for part in parts:
        for path in sorted(glob.glob(os.path.join(root, part, "*", "*", "*.wav"))):
            stem = path[:-4]
            speaker, chapter = os.path.basename(stem).split("_")[:2]
            text = [open(stem + ext, encoding="utf-8").read().strip()
                    for ext in (".original.txt", ".normalized.txt")]
            rows.append((*_wave(path), np.array(text[0]), np.array(text[1]),
                         np.array(int(speaker), np.int64), np.array(int(chapter), np.int64),
                         np.array(os.path.basename(stem))))
    return _rows(rows, ["waveform", "sample_rate", "original_text", "normalized_text",
                        "speaker_id", "chapter_id", "utterance_id"], num_samples, shuffle,
                 num_shards, shard_id)


def _varint(buf, at):
    shift = value = 0
    while True:
        byte = buf[at]
        value |= (byte & 0x7F) << shift
        at += 1
        if byte < 0x80:
            return value, at
        shift += 7


def _fields(buf):
    """(field number, wire type, value) of a protobuf message (varint or length-delimited)."""
    at = 0
    while at < len(buf):
        key, at = _varint(buf, at)
        number, kind = key >> 3, key & 7
        if kind == 0:
            value, at = _varint(buf, at)
        elif kind == 2:
            size, at = _varint(buf, at)
            value, at = buf[at:at + size], at + size
        elif kind == 5:
            value, at = buf[at:at + 4], at + 4
        elif kind == 1:
            value, at = buf[at:at + 8], at + 8
        else:
            raise ValueError(f"TFRecordDataset: unsupported protobuf wire type {kind}")
        yield number, kind, value


def _feature(buf):
    """A tf.train.Feature: bytes_list -> uint8 array (one value) or list of bytes;
    float_list -> float32; int64_list -> int64."""
    for number, _, body in _fields(buf):
        values = [(k, v) for n, k, v in _fields(body) if n == 1]
        if number == 1:
            items = [bytes(v) for _, v in values]
            return np.frombuffer(items[0], np.uint8).copy() if len(items) == 1 else np.array(
                items)
        if number == 2:
            raw = b"".join(bytes(v) for _, v in values)
            return np.frombuffer(raw, "<f4").astype(np.float32)
        if number == 3:
            out = []
            for kind, v in values:
                if kind == 2:  # packed
                    at = 0
                    while at < len(v):
                        x, at = _varint(v, at)
                        out.append(x)
                else:
                    out.append(v)
            return np.array([x - (1 << 64) if x >= 1 << 63 else x for x in out], np.int64)
    return np.zeros(0, np.float32)


def _example(buf):
    features = {}
    for number, _, body in _fields(buf):
        if number == 1:
            for n, _, entry in _fields(body):
                if n == 1:
                    kv = {k: v for k, _, v in _fields(entry)}
                    features[bytes(kv[1]).decode("utf-8")] = _feature(kv.get(2, b""))
    return features


def TFRecordDataset(dataset_files, schema=None, columns_list=None, num_samples=None,
                    num_parallel_workers=None, shuffle=None, num_shards=None, shard_id=None,
                    shard_equal_rows=False, cache=None, compression_type=None):
    """Rows of tf.train.Example records (columns_list order, default the sorted feature
    names)."""
    if compression_type:
        raise ValueError("TFRecordDataset: compressed files are not supported")
    files = [dataset_files] if isinstance(dataset_files, str) else list(dataset_files)
    examples = []
    for path in files:
        with open(path, "rb") as f:
            data = f.read()
        at = 0
        while at < len(data):
            (size,) = struct.unpack_from("<Q", data, at)
            examples.append(_example(memoryview(data)[at + 12:at + 12 + size]))
            at += 16 + size
    names = list(columns_list) if columns_list else sorted(examples[0]) if examples else []
    rows = [tuple(e[n] for n in names) for e in examples]
    return _rows(rows, names, num_samples, shuffle, num_shards, shard_id)


def WIDERFaceDataset(dataset_dir, usage=None, num_samples=None, num_parallel_workers=None,
                     shuffle=None, decode=False, sampler=None, num_shards=None, shard_id=None,
                     cache=None):
    """wider_face_split/wider_face_{train,val}_bbx_gt.txt and WIDER_{train,val}/images/:
    image, bbox (N x 4) and blur, expression, illumination, occlusion, pose, invalid (N x 1)."""
    usage = usage or "all"
    parts = ["train", "val"] if usage == "all" else [usage]
    rows = []
    for part in parts:
        lines = _lines(os.path.join(dataset_dir, "wider_face_split",
                                    f"wider_face_{part}_bbx_gt.txt"))
        at = 0
        while at < len(lines):
            name, count = lines[at].strip(), int(lines[at + 1])
            boxes = np.array([[int(x) for x in line.split()[:10]] for line in
                              lines[at + 2:at + 2 + max(count, 1)]], np.int64).reshape(-1, 10)
            boxes = boxes[:count]
            at += 2 + max(count, 1)
            rows.append((_image(os.path.join(dataset_dir, f"WIDER_{part}", "images", name),
                                decode), boxes[:, :4],
                         *(boxes[:, k:k + 1] for k in (4, 5, 6, 8, 9, 7))))
    return _rows(rows, ["image", "bbox", "blur", "expression", "illumination", "occlusion",
                        "pose", "invalid"], num_samples, shuffle, num_shards, shard_id)


def CityscapesDataset(dataset_dir, usage="train", quality_mode="fine", task="instance",
                      num_samples=None, num_parallel_workers=None, shuffle=None, decode=False,
                      sampler=None, num_shards=None, shard_id=None, cache=None):
    """leftImg8bit/<usage>/<city>/*_leftImg8bit.png with gtFine (or gtCoarse)/<usage>/<city>/
    *_gt<Mode>_{instanceIds,labelIds,color}.png or _polygons.json (task instance, semantic,
    color or polygon): image and task."""
    mode = "gtFine" if quality_mode == "fine" else "gtCoarse"
    suffix = {"instance": "instanceIds.png", "semantic": "labelIds.png", "color": "color.png",
              "polygon": "polygons.json"}[task]
    rows = []
    for path in sorted(glob.glob(os.path.join(dataset_dir, "leftImg8bit", usage, "*",
                                              "*_leftImg8bit.png"))):
        city = os.path.basename(os.path.dirname(path))
        stem = os.path.basename(path)[:-len("leftImg8bit.png")]
        target = os.path.join(dataset_dir, mode, usage, city, f"{stem}{mode}_{suffix}")
        if task == "polygon":
            with open(target, encoding="utf-8") as f:
                value = np.array(f.read())
        else:
            value = _image(target, decode)
        rows.append((_image(path, decode), value))
    return _rows(rows, ["image", "task"], num_samples, shuffle, num_shards, shard_id)


_CLUE = {"AFQMC": (["sentence1", "sentence2", "label"], ["id", "sentence1", "sentence2"]),
         "CMNLI": (["sentence1", "sentence2", "label"], ["id", "sentence1", "sentence2"]),
         "TNEWS": (["label", "label_des", "sentence", "keywords"],
                   ["id", "sentence", "keywords"]),
         "IFLYTEK": (["label", "label_des", "sentence"], ["id", "sentence"])}


def CLUEDataset(dataset_files, task="AFQMC", usage="train", num_samples=None,
                num_parallel_workers=None, shuffle=None, num_shards=None, shard_id=None,
                cache=None):
    """JSON-lines files of a CLUE task (AFQMC, CMNLI, TNEWS, IFLYTEK): the task's fields as
    str columns (test files: id and the inputs)."""
    if task not in _CLUE:
        raise ValueError(f"CLUEDataset: task must be one of {sorted(_CLUE)}, got {task!r}")
    names = _CLUE[task][1 if usage == "test" else 0]
    files = [dataset_files] if isinstance(dataset_files, str) else list(dataset_files)
    rows = [tuple(np.array(str(item.get(n, ""))) for n in names)
            for path in files for item in map(json.loads, _lines(path))]
    return _rows(rows, names, num_samples, shuffle, num_shards, shard_id)
