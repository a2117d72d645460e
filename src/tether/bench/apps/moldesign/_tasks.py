"""The moldesign tasks (imports RDKit and tblite)."""

from __future__ import annotations

import os
import pathlib
import random

import numpy as np

__all__ = ['KNNModel', 'compute_ip', 'fingerprint', 'infer', 'search_space', 'train']

_HARTREE_EV = 27.211386245988
_BOHR_ANGSTROM = 0.529177210903
_ELEMENTS = frozenset({'C', 'H', 'N', 'O', 'F'})


def search_space(
    max_heavy_atoms: int,
    size: int,
    seed: int,
    dataset: str | os.PathLike[str] | None = None,
) -> list[str]:
    """Small neutral C/H/N/O/F molecules (canonical SMILES) of a SMILES file.

    The file (first column of each line a SMILES) is ``dataset``, by default RDKit's
    bundled NCI list.
    """
    from rdkit import Chem, RDConfig, RDLogger

    RDLogger.DisableLog('rdApp.*')  # type: ignore[attr-defined]
    if dataset is None:
        path = pathlib.Path(RDConfig.RDDataDir) / 'NCI' / 'first_5K.smi'
    else:
        path = pathlib.Path(dataset)
    found: set[str] = set()
    with open(path, encoding='utf-8') as f:
        for line in f:
            smiles = line.split()[0] if line.strip() else ''
            mol = Chem.MolFromSmiles(smiles) if smiles else None
            if mol is None or '.' in smiles:
                continue
            atoms = mol.GetAtoms()
            if not 2 <= mol.GetNumHeavyAtoms() <= max_heavy_atoms:
                continue
            if any(a.GetSymbol() not in _ELEMENTS or a.GetFormalCharge() for a in atoms):
                continue
            if any(a.GetNumRadicalElectrons() for a in atoms):
                continue
            found.add(Chem.MolToSmiles(mol))
    molecules = sorted(found)
    random.Random(seed).shuffle(molecules)
    return sorted(molecules[:size])


def compute_ip(smiles: str, seed: int = 0) -> float:
    """Vertical ionization potential (eV) with GFN2-xTB at an MMFF geometry; NaN on failure."""
    os.environ.setdefault('OMP_NUM_THREADS', '1')
    from rdkit import Chem
    from rdkit.Chem import AllChem
    from tblite.interface import Calculator

    mol = Chem.AddHs(Chem.MolFromSmiles(smiles))
    if AllChem.EmbedMolecule(mol, randomSeed=seed) != 0:  # type: ignore[attr-defined]
        return float('nan')
    if AllChem.MMFFHasAllMoleculeParams(mol):  # type: ignore[attr-defined]
        AllChem.MMFFOptimizeMolecule(mol)  # type: ignore[attr-defined]
    numbers = np.array([a.GetAtomicNum() for a in mol.GetAtoms()])
    positions = mol.GetConformer().GetPositions() / _BOHR_ANGSTROM
    energies = []
    for charge, unpaired in ((0, 0), (1, 1)):
        calc = Calculator('GFN2-xTB', numbers, positions, charge=charge, uhf=unpaired)
        calc.set('verbosity', 0)
        energies.append(float(calc.singlepoint().get('energy')))
    return (energies[1] - energies[0]) * _HARTREE_EV


def fingerprint(smiles: str, bits: int = 256) -> np.ndarray:
    """Morgan fingerprint (radius 2) as a 0/1 vector."""
    from rdkit import Chem, DataStructs
    from rdkit.Chem import rdFingerprintGenerator

    generator = rdFingerprintGenerator.GetMorganGenerator(radius=2, fpSize=bits)
    fp = generator.GetFingerprint(Chem.MolFromSmiles(smiles))
    out = np.zeros((bits,), dtype=np.float32)
    DataStructs.ConvertToNumpyArray(fp, out)
    return out


class KNNModel:
    """k-nearest-neighbours regression on fingerprints by Tanimoto similarity.

    Predicts the similarity-weighted mean IP of the ``k`` most similar training
    molecules (NumPy only, so workers need not import scikit-learn and SciPy).
    """

    def __init__(self, fingerprints: np.ndarray, values: np.ndarray, k: int) -> None:
        self.fingerprints = fingerprints
        self.values = values
        self.k = k

    def predict(self, x: np.ndarray) -> np.ndarray:
        """Predicted values for the fingerprints ``x`` (one per row)."""
        common = x @ self.fingerprints.T
        union = x.sum(1)[:, None] + self.fingerprints.sum(1)[None, :] - common
        similarity = np.divide(common, union, out=np.zeros_like(common), where=union > 0)
        nearest = np.argsort(-similarity, axis=1)[:, : self.k]
        weights = np.take_along_axis(similarity, nearest, axis=1) + 1e-6
        return np.asarray((weights * self.values[nearest]).sum(1) / weights.sum(1))


def train(smiles: list[str], ips: list[float]) -> KNNModel:
    """Fit a k-nearest-neighbours model of IP on fingerprints."""
    x = np.stack([fingerprint(s) for s in smiles])
    return KNNModel(x, np.asarray(ips, dtype=np.float64), k=min(4, len(smiles)))


def infer(model: KNNModel, smiles: list[str]) -> list[float]:
    """Predicted IP of each molecule."""
    if not smiles:
        return []
    x = np.stack([fingerprint(s) for s in smiles])
    return [float(v) for v in model.predict(x)]
