"""mindspore.dataset image, audio and SQuAD readers (zenith/dataset/media.py) on small files
written in each corpus's layout."""

import json
import os
import wave

import numpy as np
import pytest

from zenith import Tensor
from zenith import _zenith as _C
from zenith import dataset as ds


def rows(dataset):
    return list(dataset.create_tuple_iterator(output_numpy=True))


def png(path, value):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    image = np.full((2, 3, 3), value, np.uint8)
    with open(path, "wb") as f:
        f.write(_C.data.encode_png(Tensor(image)))
    return image


def wav(path, samples, rate=8000):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(np.asarray(samples, "<i2").tobytes())


def test_image_folder_corpora(tmp_path):
    root = str(tmp_path)
    png(f"{root}/c256/002.bat/a.png", 10)
    png(f"{root}/c256/001.ak47/b.png", 20)
    got = rows(ds.Caltech256Dataset(f"{root}/c256", shuffle=False, decode=True))
    assert [int(r[1]) for r in got] == [0, 1] and got[0][0].shape == (2, 3, 3)
    assert int(got[0][0][0, 0, 0]) == 20
    raw = rows(ds.Caltech256Dataset(f"{root}/c256", shuffle=False))[0][0]
    assert raw.dtype == np.uint8 and raw.ndim == 1 and bytes(raw[:4]) == b"\x89PNG"
    png(f"{root}/c101/101_ObjectCategories/accordion/1.png", 1)
    png(f"{root}/c101/101_ObjectCategories/BACKGROUND_Google/1.png", 2)
    png(f"{root}/c101/101_ObjectCategories/yak/1.png", 3)
    c101 = ds.Caltech101Dataset(f"{root}/c101", shuffle=False)
    assert c101.get_col_names() == ["image", "category"]
    assert [int(r[1]) for r in rows(c101)] == [0, 1]
    png(f"{root}/sst/train/positive/0.png", 5)
    png(f"{root}/sst/train/negative/0.png", 6)
    png(f"{root}/sst/test/negative/1.png", 7)
    assert [int(r[1]) for r in rows(ds.RenderedSST2Dataset(f"{root}/sst", "train",
                                                           shuffle=False))] == [0, 1]
    assert len(rows(ds.RenderedSST2Dataset(f"{root}/sst"))) == 3
    png(f"{root}/omni/images_background/Greek/character01/a.png", 1)
    png(f"{root}/omni/images_background/Greek/character02/a.png", 1)
    png(f"{root}/omni/images_evaluation/Atlantean/character01/a.png", 1)
    assert [int(r[1]) for r in rows(ds.OmniglotDataset(f"{root}/omni", shuffle=False))] == [
        0, 1, 2]
    assert len(rows(ds.OmniglotDataset(f"{root}/omni", background=False))) == 1
    os.makedirs(f"{root}/sun", exist_ok=True)
    with open(f"{root}/sun/ClassName.txt", "w") as f:
        f.write("/a/abbey\n/b/beach\n")
    png(f"{root}/sun/b/beach/sun_1.png", 4)
    assert [int(r[1]) for r in rows(ds.SUN397Dataset(f"{root}/sun"))] == [1]
    os.makedirs(f"{root}/food/meta", exist_ok=True)
    with open(f"{root}/food/meta/test.txt", "w") as f:
        f.write("apple_pie/11\n")
    png(f"{root}/food/images/apple_pie/11.jpg", 9)  # PNG bytes under .jpg: decoded by content
    image, label = rows(ds.Food101Dataset(f"{root}/food", "test", decode=True))[0]
    assert str(label) == "apple_pie" and int(np.asarray(image)[0, 0, 0]) == 9


def test_stl10(tmp_path):
    images = np.random.default_rng(0).integers(0, 256, (2, 96, 96, 3), np.uint8)
    images.transpose(0, 3, 2, 1).tofile(str(tmp_path / "train_X.bin"))
    np.array([3, 10], np.uint8).tofile(str(tmp_path / "train_y.bin"))
    got = rows(ds.STL10Dataset(str(tmp_path), "train", shuffle=False))
    assert (got[1][0] == images[1]).all() and [int(r[1]) for r in got] == [2, 9]
    with pytest.raises(ValueError, match="usage"):
        ds.STL10Dataset(str(tmp_path), "valid")


def test_audio_corpora(tmp_path):
    root = str(tmp_path)
    wav(f"{root}/yesno/0_1_1_0_0_0_1_1.wav", [0, 16384, -32768])
    waveform, rate, label = rows(ds.YesNoDataset(f"{root}/yesno"))[0]
    assert np.asarray(waveform).tolist() == [[0.0, 0.5, -1.0]] and int(rate) == 8000
    assert np.asarray(label).tolist() == [0, 1, 1, 0, 0, 0, 1, 1]
    wav(f"{root}/lj/wavs/LJ001-0001.wav", [1, 2])
    with open(f"{root}/lj/metadata.csv", "w") as f:
        f.write("LJ001-0001|Printing, in 1 sense|Printing, in one sense\n")
    got = rows(ds.LJSpeechDataset(f"{root}/lj"))[0]
    assert str(got[2]) == "Printing, in 1 sense" and str(got[3]) == "Printing, in one sense"
    for rel in ("yes/ab12_nohash_0.wav", "yes/cd34_nohash_1.wav", "no/ab12_nohash_2.wav"):
        wav(f"{root}/sc/{rel}", [5])
    with open(f"{root}/sc/testing_list.txt", "w") as f:
        f.write("yes/cd34_nohash_1.wav\n")
    test = rows(ds.SpeechCommandsDataset(f"{root}/sc", "test"))
    assert [(str(r[2]), str(r[3]), int(r[4])) for r in test] == [("yes", "cd34", 1)]
    assert len(rows(ds.SpeechCommandsDataset(f"{root}/sc", "train"))) == 2
    wav(f"{root}/gtzan/blues/blues.00000.wav", [1])
    wav(f"{root}/gtzan/jazz/jazz.00000.wav", [1])
    assert sorted(str(r[2]) for r in rows(ds.GTZANDataset(f"{root}/gtzan"))) == ["blues",
                                                                                  "jazz"]
    wav(f"{root}/arctic/cmu_us_aew_arctic/wav/arctic_a0001.wav", [7])
    os.makedirs(f"{root}/arctic/cmu_us_aew_arctic/etc", exist_ok=True)
    with open(f"{root}/arctic/cmu_us_aew_arctic/etc/txt.done.data", "w") as f:
        f.write('( arctic_a0001 "Author of the danger trail." )\n')
    got = rows(ds.CMUArcticDataset(f"{root}/arctic", "aew"))[0]
    assert str(got[2]) == "Author of the danger trail." and str(got[3]) == "arctic_a0001"


def test_squad(tmp_path):
    doc = {"data": [{"paragraphs": [{"context": "Zenith runs MindSpore programs.", "qas": [
        {"question": "What runs?", "answers": [{"text": "Zenith", "answer_start": 0}]},
        {"question": "Runs what?", "answers": [{"text": "MindSpore programs",
                                                "answer_start": 12}]}]}]}]}
    (tmp_path / "dev-v1.1.json").write_text(json.dumps(doc))
    got = rows(ds.SQuADDataset(str(tmp_path), "dev", shuffle=False))
    assert len(got) == 2 and str(got[1][1]) == "Runs what?"
    assert np.asarray(got[1][2]).tolist() == ["MindSpore programs"]
    assert np.asarray(got[1][3]).tolist() == [12]
