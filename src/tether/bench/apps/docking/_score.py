"""Rigid-ligand docking with a Vina-like empirical score (the stand-in for AutoDock Vina).

A ligand gets one RDKit conformer (ETKDG, then MMFF); poses are rigid rotations and
translations of it inside the search box. A pose's score sums, over ligand-receptor
heavy-atom pairs closer than 8 A, AutoDock Vina's published terms of the surface
distance ``d = r - R1 - R2`` (van der Waals radii), with Vina's weights: ``gauss1``
(-0.0356), ``gauss2`` (-0.00516), ``repulsion`` (0.840), ``hydrophobic`` (-0.0351) and
``hydrogen bond`` (-0.587), divided by ``1 + 0.0585 * rotatable bonds``. The search is
random starts refined by Monte Carlo steps, keeping the best. It is not Vina (no
torsional flexibility, no gradient optimizer), so scores rank ligands the way Vina's do
only roughly; it needs nothing beyond RDKit and NumPy.
"""

from __future__ import annotations

import os
import pathlib
from dataclasses import dataclass

import numpy as np

from tether.exceptions import InvalidArgumentError

__all__ = ['Atoms', 'dock', 'ligand_atoms', 'read_pdbqt']

# van der Waals radii (A) of Vina's X-Score atom types, by element.
_RADIUS = {'C': 1.9, 'N': 1.8, 'O': 1.7, 'S': 2.0, 'P': 2.1, 'F': 1.5, 'Cl': 1.8, 'Br': 2.0}
_CUTOFF = 8.0
_WEIGHTS = (-0.0356, -0.00516, 0.840, -0.0351, -0.587)
_ROT_WEIGHT = 0.0585


@dataclass(frozen=True)
class Atoms:
    """Heavy atoms: coordinates ``(n, 3)`` and per-atom radius and chemistry flags."""

    xyz: np.ndarray
    radius: np.ndarray
    hydrophobic: np.ndarray
    donor: np.ndarray
    acceptor: np.ndarray


def _element_of_ad_type(ad_type: str) -> str:
    t = ad_type.strip()
    return {'A': 'C', 'OA': 'O', 'NA': 'N', 'SA': 'S', 'HD': 'H', 'HS': 'H'}.get(t, t)


def read_pdbqt(path: str | os.PathLike[str]) -> Atoms:
    """Heavy atoms of a receptor PDBQT (``ATOM``/``HETATM`` records, AutoDock types).

    ``C``/``A`` carbons count as hydrophobic; ``N``/``NA``/``OA`` with a bonded ``HD``
    (within 1.1 A) as donors; ``NA``, ``OA`` and ``SA`` as acceptors.
    """
    xyz, types = [], []
    for line in pathlib.Path(path).read_text(encoding='utf-8').splitlines():
        if line.startswith(('ATOM', 'HETATM')) and len(line) >= 54:
            xyz.append([float(line[30:38]), float(line[38:46]), float(line[46:54])])
            types.append(line[76:79].strip() or line[12:16].strip()[:1])
    if not xyz:
        raise InvalidArgumentError(f'{path}: no ATOM or HETATM records')
    coords = np.array(xyz)
    elements = [_element_of_ad_type(t) for t in types]
    hydrogens = coords[[e == 'H' for e in elements]]
    heavy = [i for i, e in enumerate(elements) if e != 'H']
    donor = []
    for i in heavy:
        polar = elements[i] in ('N', 'O')
        near_h = len(hydrogens) and bool(
            (np.linalg.norm(hydrogens - coords[i], axis=1) < 1.1).any()
        )
        donor.append(polar and bool(near_h))
    return Atoms(
        xyz=coords[heavy],
        radius=np.array([_RADIUS.get(elements[i], 1.9) for i in heavy]),
        hydrophobic=np.array([types[i] in ('C', 'A') for i in heavy]),
        donor=np.array(donor),
        acceptor=np.array([types[i] in ('NA', 'OA', 'SA') for i in heavy]),
    )


def ligand_atoms(smiles: str, seed: int = 0) -> tuple[Atoms, int]:
    """One 3-D conformer of ``smiles`` (centred), its rotatable bonds between heavy atoms."""
    from rdkit import Chem, RDLogger
    from rdkit.Chem import AllChem, Lipinski

    RDLogger.DisableLog('rdApp.*')  # type: ignore[attr-defined]
    mol = Chem.MolFromSmiles(smiles)
    if mol is None:
        raise InvalidArgumentError(f'not a SMILES string RDKit reads: {smiles!r}')
    mol = Chem.AddHs(mol)
    if AllChem.EmbedMolecule(mol, randomSeed=seed) != 0:  # type: ignore[attr-defined]
        raise InvalidArgumentError(f'RDKit found no 3-D conformer for {smiles!r}')
    AllChem.MMFFOptimizeMolecule(mol)  # type: ignore[attr-defined]
    conf = mol.GetConformer()
    heavy = [a for a in mol.GetAtoms() if a.GetAtomicNum() > 1]
    xyz = np.array([list(conf.GetAtomPosition(a.GetIdx())) for a in heavy])
    hydrophobic, donor, acceptor = [], [], []
    for a in heavy:
        symbol = a.GetSymbol()
        neighbours = {n.GetSymbol() for n in a.GetNeighbors()}
        hydrophobic.append(symbol in ('C', 'Cl', 'Br', 'I') and not neighbours & {'N', 'O'})
        donor.append(symbol in ('N', 'O') and a.GetTotalNumHs() > 0)
        acceptor.append(symbol == 'O' or (symbol == 'N' and not a.GetIsAromatic()))
    atoms = Atoms(
        xyz=xyz - xyz.mean(axis=0),
        radius=np.array([_RADIUS.get(a.GetSymbol(), 1.9) for a in heavy]),
        hydrophobic=np.array(hydrophobic),
        donor=np.array(donor),
        acceptor=np.array(acceptor),
    )
    rotatable = Lipinski.NumRotatableBonds(Chem.RemoveHs(mol))  # type: ignore[attr-defined]
    return atoms, int(rotatable)


def _rotations(rng: np.random.Generator, count: int, scale: float = np.pi) -> np.ndarray:
    """``count`` random rotation matrices (axis-angle, angle up to ``scale``)."""
    axis = rng.normal(size=(count, 3))
    axis /= np.linalg.norm(axis, axis=1, keepdims=True)
    angle = rng.uniform(-scale, scale, count)
    k = np.zeros((count, 3, 3))
    k[:, 0, 1], k[:, 0, 2], k[:, 1, 2] = -axis[:, 2], axis[:, 1], -axis[:, 0]
    k = k - k.transpose(0, 2, 1)
    s, c = np.sin(angle)[:, None, None], np.cos(angle)[:, None, None]
    return np.eye(3) + s * k + (1 - c) * (k @ k)


def _scores(poses: np.ndarray, ligand: Atoms, receptor: Atoms, rotatable: int) -> np.ndarray:
    """Score of each pose (``(p, n, 3)`` ligand coordinates); lower binds better."""
    r = np.linalg.norm(poses[:, :, None, :] - receptor.xyz[None, None, :, :], axis=-1)
    d = r - ligand.radius[None, :, None] - receptor.radius[None, None, :]
    near = r < _CUTOFF
    gauss1 = np.exp(-((d / 0.5) ** 2))
    gauss2 = np.exp(-(((d - 3.0) / 2.0) ** 2))
    repulsion = np.where(d < 0, d * d, 0.0)
    hydrophobic_pair = ligand.hydrophobic[:, None] & receptor.hydrophobic[None, :]
    hydrophobic = np.clip(1.5 - d, 0.0, 1.0) * hydrophobic_pair
    hbond_pair = (ligand.donor[:, None] & receptor.acceptor[None, :]) | (
        ligand.acceptor[:, None] & receptor.donor[None, :]
    )
    hbond = np.clip(-d / 0.7, 0.0, 1.0) * hbond_pair
    terms = (gauss1, gauss2, repulsion, hydrophobic, hbond)
    total = sum(w * (t * near).sum(axis=(1, 2)) for w, t in zip(_WEIGHTS, terms, strict=True))
    return np.asarray(total) / (1 + _ROT_WEIGHT * rotatable)


def dock(
    ligand: Atoms,
    rotatable: int,
    receptor: Atoms,
    center: np.ndarray,
    box: float,
    *,
    starts: int = 64,
    steps: int = 60,
    seed: int = 0,
) -> tuple[float, np.ndarray]:
    """Best score and pose found: ``starts`` random poses, each refined by ``steps`` MC steps."""
    rng = np.random.default_rng(seed)
    half = box / 2
    rot = _rotations(rng, starts)
    shift = center + rng.uniform(-half, half, (starts, 3))
    poses = np.einsum('pij,nj->pni', rot, ligand.xyz) + shift[:, None, :]
    scores = _scores(poses, ligand, receptor, rotatable)
    for step in range(steps):
        scale = 1.0 - step / (steps + 1)
        turn = _rotations(rng, starts, 0.3 * scale)
        centroid = poses.mean(axis=1, keepdims=True)
        moved = np.einsum('pij,pnj->pni', turn, poses - centroid) + centroid
        moved += rng.normal(0, 0.5 * scale, (starts, 1, 3))
        inside = (np.abs(moved.mean(axis=1) - center) <= half).all(axis=1)
        new = _scores(moved, ligand, receptor, rotatable)
        better = inside & (new < scores)
        poses[better], scores[better] = moved[better], new[better]
    best = int(np.argmin(scores))
    return float(scores[best]), poses[best]
