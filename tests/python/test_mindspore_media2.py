"""More mindspore.dataset corpus readers (zenith/dataset/media2.py) on small files written in
each corpus's layout, and TFRecordDataset on hand-encoded tf.train.Example records."""

import json
import os
import struct

import numpy as np

from zenith import dataset as ds
from test_mindspore_media import png, rows, wav


def text(path, body):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(body)


def test_captioned_and_listed_image_corpora(tmp_path):
    r = str(tmp_path)
    png(f"{r}/celeba/img_align_celeba/000001.jpg", 1)
    png(f"{r}/celeba/img_align_celeba/000002.jpg", 2)
    text(f"{r}/celeba/list_attr_celeba.txt", "2\nSmiling Young\n000001.jpg -1 1\n"
                                             "000002.jpg 1 1\n")
    text(f"{r}/celeba/list_eval_partition.txt", "000001.jpg 0\n000002.jpg 2\n")
    assert [np.asarray(x[1]).tolist() for x in rows(ds.CelebADataset(
        f"{r}/celeba", shuffle=False))] == [[0, 1], [1, 1]]
    assert len(rows(ds.CelebADataset(f"{r}/celeba", usage="test"))) == 1
    png(f"{r}/flickr/a.jpg", 3)
    text(f"{r}/flickr.token.txt", "a.jpg#0\tA dog runs.\na.jpg#1\tA brown dog.\n")
    got = rows(ds.FlickrDataset(f"{r}/flickr", f"{r}/flickr.token.txt"))[0]
    assert np.asarray(got[1]).tolist() == ["A dog runs.", "A brown dog."]
    png(f"{r}/sbu/sbu_images/x.jpg", 4)
    text(f"{r}/sbu/SBU_captioned_photo_dataset_urls.txt", "http://h/x.jpg\nhttp://h/gone.jpg\n")
    text(f"{r}/sbu/SBU_captioned_photo_dataset_captions.txt", "a cat\nlost\n")
    assert [str(x[1]) for x in rows(ds.SBUDataset(f"{r}/sbu"))] == ["a cat"]
    png(f"{r}/m/1.png", 5)
    png(f"{r}/m/2.png", 6)
    text(f"{r}/m.manifest", "\n".join(json.dumps(
        {"source": f"{r}/m/{i}.png", "usage": u, "annotation": [{"name": n}]})
        for i, u, n in ((1, "train", "dog"), (2, "train", "cat"))))
    assert [np.asarray(x[1]).tolist() for x in rows(ds.ManifestDataset(
        f"{r}/m.manifest", shuffle=False))] == [[1], [0]]
    png(f"{r}/div/DIV2K_train_HR/0001.png", 7)
    png(f"{r}/div/DIV2K_train_LR_bicubic/X2/0001x2.png", 8)
    hr, lr = rows(ds.DIV2KDataset(f"{r}/div", decode=True))[0]
    assert int(hr[0, 0, 0]) == 7 and int(lr[0, 0, 0]) == 8
    png(f"{r}/places/data_256/a/airfield/1.jpg", 9)
    text(f"{r}/places/places365_train_standard.txt", "/a/airfield/1.jpg 0\n")
    assert int(rows(ds.Places365Dataset(f"{r}/places"))[0][1]) == 0


def test_detection_corpora(tmp_path):
    r = str(tmp_path)
    png(f"{r}/coco/im.jpg", 1)
    text(f"{r}/coco.json", json.dumps({
        "images": [{"id": 7, "file_name": "im.jpg"}],
        "annotations": [{"image_id": 7, "bbox": [1, 2, 3, 4], "category_id": 18,
                         "iscrowd": 0}], "categories": [{"id": 18, "name": "dog"}]}))
    _, bbox, cat, crowd = rows(ds.CocoDataset(f"{r}/coco", f"{r}/coco.json"))[0]
    assert bbox.tolist() == [[1, 2, 3, 4]] and cat.tolist() == [[18]] and crowd.tolist() == [[0]]
    png(f"{r}/voc/JPEGImages/2007_1.jpg", 2)
    text(f"{r}/voc/ImageSets/Main/train.txt", "2007_1\n")
    text(f"{r}/voc/Annotations/2007_1.xml", "<annotation><object><name>dog</name>"
         "<difficult>1</difficult><bndbox><xmin>10</xmin><ymin>20</ymin><xmax>30</xmax>"
         "<ymax>60</ymax></bndbox></object><object><name>cat</name><bndbox><xmin>1</xmin>"
         "<ymin>1</ymin><xmax>2</xmax><ymax>2</ymax></bndbox></object></annotation>")
    _, bbox, label, difficult, _ = rows(ds.VOCDataset(f"{r}/voc", "Detection"))[0]
    assert bbox.tolist() == [[10, 20, 20, 40], [1, 1, 1, 1]]
    assert label.tolist() == [[1], [0]] and difficult.tolist() == [[1], [0]]
    png(f"{r}/voc/SegmentationClass/2007_1.png", 3)
    text(f"{r}/voc/ImageSets/Segmentation/train.txt", "2007_1\n")
    assert int(rows(ds.VOCDataset(f"{r}/voc", decode=True))[0][1][0, 0, 0]) == 3
    png(f"{r}/kitti/data_object_image_2/training/image_2/000000.png", 4)
    text(f"{r}/kitti/data_object_label_2/training/label_2/000000.txt",
         "Cyclist 0.00 1 -1.57 599.41 156.40 629.75 189.25 2.85 2.63 12.34 0.47 1.49 69.44 "
         "-1.56\n")
    got = rows(ds.KITTIDataset(f"{r}/kitti"))[0]
    assert got[1].tolist() == [[5]] and got[2].tolist() == [[0.0]]
    assert got[3].tolist() == [[1]]
    np.testing.assert_allclose(got[5], [[599.41, 156.40, 629.75, 189.25]], rtol=1e-6)
    np.testing.assert_allclose(got[8], [[-1.56]], rtol=1e-6)


def test_libritts(tmp_path):
    r = str(tmp_path)
    stem = f"{r}/LibriTTS/dev-clean/84/121123/84_121123_000007_000001"
    wav(stem + ".wav", [100, -100], rate=24000)
    text(stem + ".original.txt", "Dr. Who")
    text(stem + ".normalized.txt", "Doctor Who")
    got = rows(ds.LibriTTSDataset(r, "dev-clean"))[0]
    assert int(got[1]) == 24000 and str(got[2]) == "Dr. Who" and str(got[3]) == "Doctor Who"
    assert (int(got[4]), int(got[5]), str(got[6])) == (84, 121123, "84_121123_000007_000001")


def varint(n):
    out = b""
    while True:
        out += bytes([(n & 0x7F) | (0x80 if n > 0x7F else 0)])
        n >>= 7
        if not n:
            return out


def field(number, body):
    return varint(number << 3 | 2) + varint(len(body)) + body


def example(features):
    entries = b""
    for name, (kind, values) in features.items():
        if kind == "bytes":
            body = b"".join(field(1, v) for v in values)
        elif kind == "float":
            body = field(1, struct.pack(f"<{len(values)}f", *values))
        else:
            body = field(1, b"".join(varint(v % (1 << 64)) for v in values))
        feature = field({"bytes": 1, "float": 2, "int64": 3}[kind], body)
        entries += field(1, field(1, name.encode()) + field(2, feature))
    return field(1, entries)


def test_tfrecord(tmp_path):
    path = str(tmp_path / "data.tfrecord")
    with open(path, "wb") as f:
        for i in range(3):
            record = example({"image": ("bytes", [bytes([i, 255])]),
                              "label": ("int64", [i - 1]), "score": ("float", [0.5, i])})
            f.write(struct.pack("<Q", len(record)) + b"\0" * 4 + record + b"\0" * 4)
    got = rows(ds.TFRecordDataset(path, shuffle=False))
    assert ds.TFRecordDataset(path).get_col_names() == ["image", "label", "score"]
    assert got[2][0].tolist() == [2, 255] and got[0][1].tolist() == [-1]
    assert got[2][2].tolist() == [0.5, 2.0]
    only = rows(ds.TFRecordDataset(path, columns_list=["label"], shuffle=False))
    assert [x[0].tolist() for x in only] == [[-1], [0], [1]]


def test_wider_face_cityscapes_and_clue(tmp_path):
    r = str(tmp_path)
    png(f"{r}/wf/WIDER_val/images/0--Parade/a.jpg", 1)
    png(f"{r}/wf/WIDER_val/images/0--Parade/b.jpg", 2)
    text(f"{r}/wf/wider_face_split/wider_face_val_bbx_gt.txt",
         "0--Parade/a.jpg\n2\n1 2 3 4 2 0 0 0 1 0\n5 6 7 8 0 1 0 0 0 2\n"
         "0--Parade/b.jpg\n0\n0 0 0 0 0 0 0 0 0 0\n")
    got = rows(ds.WIDERFaceDataset(f"{r}/wf", "val", shuffle=False))
    assert got[0][1].tolist() == [[1, 2, 3, 4], [5, 6, 7, 8]] and got[0][2].tolist() == [[2], [0]]
    assert got[0][6].tolist() == [[0], [2]] and got[1][1].shape == (0, 4)
    png(f"{r}/cs/leftImg8bit/val/ulm/ulm_000000_000019_leftImg8bit.png", 3)
    png(f"{r}/cs/gtFine/val/ulm/ulm_000000_000019_gtFine_labelIds.png", 4)
    image, target = rows(ds.CityscapesDataset(f"{r}/cs", "val", task="semantic",
                                              decode=True))[0]
    assert int(image[0, 0, 0]) == 3 and int(target[0, 0, 0]) == 4
    text(f"{r}/afqmc/train.json", json.dumps({"sentence1": "a", "sentence2": "b",
                                              "label": "1"}) + "\n")
    clue = ds.CLUEDataset(f"{r}/afqmc/train.json", "AFQMC", "train")
    assert clue.get_col_names() == ["sentence1", "sentence2", "label"]
    assert [str(v) for v in rows(clue)[0]] == ["a", "b", "1"]
