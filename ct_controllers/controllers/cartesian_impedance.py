"""Cartesian impedance: the TCP held to a target pose by a spring and a damper, the arm's
redundancy by a posture spring in the dynamically consistent nullspace.

    τ_arm = Jᵀ (K e + D (ẋ* − ẋ) + F_ff) + N (K_n (q_n − q) − D_n q̇) + g(q) [+ C(q, q̇) q̇]
    τ_f   = K_f (q*_f − q_f) + D_f (q̇*_f − q̇_f) + g_f(q) [+ (C q̇)_f]      (other joints)

(each plus the joint reference's feed-forward effort when it carries one), with

- J (6 × n) the ``LOCAL_WORLD_ALIGNED`` TCP Jacobian of the n *arm joints* — those that move the
  TCP (the TCP frame's supporting joints); e = [p_c − p; log3(R_c Rᵀ)] [m; rad] the pose error of
  the TCP to the *commanded* pose (p_c, R_c) in base axes — the pairing of
  :mod:`ct_controllers.model.frames` (δe = −J δq); ẋ = J q̇; ẋ* the target's twist, F_ff its
  wrench [N; N·m] (zero without);
- K (6 × 6, symmetric positive semi-definite) given in the base frame or the TCP frame
  (``stiffness_frame``; then K_base = R̂ K R̂ᵀ, R̂ = diag(R, R) with the measured TCP rotation),
  as a diagonal (x, y, z [N/m]; rx, ry, rz [N·m/rad]) or a full matrix;
- Λ = (J M_a⁻¹ Jᵀ + λ² I)⁻¹ the operational-space inertia [kg | kg·m²], M_a the arm joints' block
  of M(q): the other joints (fingers) are taken as held by their own servo (locked);
- D from ``damping_ratio`` ζ by *double diagonalization* (Albu-Schäffer et al., 2003): the
  generalized eigenvectors Φ of (K, Λ) (Φᵀ Λ Φ = I, Φᵀ K Φ = diag(ω²)) diagonalize both, and
  D = Λ Φ diag(2 ζ ωᵢ) Φᵀ Λ gives every mode of Λ ẍ + D ẋ + K x = 0 exactly the damping ratio ζ.
  Chosen over the factorization D = ζ (Λ^½ K^½ + K^½ Λ^½), which is exact only when Λ and K
  commute (on the bundled arm, K = (900, 300, 600 N/m; 40, 20, 30 N·m/rad) and ζ = 0.7, its
  modes get 0.62-0.70 over ten checked configurations, up to 11 % short), at no more cost: one
  6 × 6 symmetric eigenproblem per tick (the factorization needs two matrix square roots).
  Or D given explicitly (``damping_mode: explicit``, in ``stiffness_frame`` like K);
- J̄ = M_a⁻¹ Jᵀ Λ the dynamically consistent inverse and N = I − Jᵀ J̄ᵀ the nullspace projector:
  a torque N τ₀ produces no TCP acceleration (J M_a⁻¹ N τ₀ = 0 at λ = 0); q_n is the joint
  reference's position (the posture the loop holds, or the joint motion it runs);
- λ² raised near singularities with the differential IK's measure
  (:mod:`ct_controllers.references.diff_ik_task`): s the manipulability ∏σᵢ of J (or its
  condition number κ), s₀ the threshold, λ² = λ_max² (1 − s/s₀)² below it (κ: (1 − κ₀/κ)²
  above it), 0 elsewhere. λ² is added to J M_a⁻¹ Jᵀ [1/kg | 1/(kg·m²)]: it bounds the inertia
  (and the damping and nullspace terms built on it) that a singular direction would otherwise
  drive to infinity; away from singularities Λ is exact.

The commanded pose follows the target with a bounded step per tick (crisp_controllers'
safety limit): ‖p_c⁺ − p_c‖ ≤ ``max_position_step`` [m], the rotation angle of R_c⁺ R_cᵀ ≤
``max_rotation_step`` [rad] (along the geodesic toward the target). Its source:

- a Cartesian target (:meth:`CartesianImpedanceController.set_target`, from any thread, taken
  at the next tick): its pose, twist and wrench;
- none set (or :meth:`~CartesianImpedanceController.clear_target`): the forward kinematics of
  the loop's joint reference, ẋ* = J(q*) q̇* — a joint motion the loop runs is then tracked in
  Cartesian space, and a held joint reference holds the TCP where it is.

On activation (:meth:`~CartesianImpedanceController.prepare`) and after a gap in the state's
stamps (the controller was not run: inactive, a fault reaction) the commanded pose restarts from
the measured TCP pose, so a target is approached from where the arm is, never jumped to.

Linearized at an equilibrium (e = 0, q = q_n, at rest) the law is τ ≈ −K_q δq − D_q δq̇ with
K_q = Jᵀ K J + K_n N, D_q = Jᵀ D J + D_n N on the arm joints and K_f, D_f on the others
(:meth:`CartesianImpedanceController.linear_feedback`): what the sampled-loop stability check and
the live-gain judgement (:mod:`ct_controllers.runtime.gain_checks`) evaluate.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np
import pinocchio as pin
from numpy.typing import NDArray
from scipy.linalg import lapack

from ct_controllers.controllers.controller import (
    CARTESIAN,
    Controller,
    FloatArray,
    GainError,
    JointReference,
    JointState,
)
from ct_controllers.model.model_state import ModelState
from ct_controllers.model.robot import RobotModel
from ct_controllers.parameter_schema import (
    ParameterSchema,
    ParameterSpec,
    non_negative,
    one_of,
    positive,
)
from ct_controllers.references.diff_ik_parameters import (
    CONDITION_NUMBER,
    MANIPULABILITY,
    SINGULARITY_MEASURES,
)
from ct_controllers.references.reference_generator import CartesianTarget

BASE = "base"
TCP = "tcp"
FRAMES = (BASE, TCP)
RATIO = "ratio"
EXPLICIT = "explicit"
DAMPING_MODES = (RATIO, EXPLICIT)
AXES = ("x", "y", "z", "rx", "ry", "rz")
# A gap in the state's stamps longer than this [s] means the controller was not run in between
# (inactive, a fault reaction): the commanded pose restarts from the measured one.
RESTART_GAP = 0.05
SYMMETRY_TOLERANCE = 1e-9  # relative, of a full 6 x 6 stiffness or damping
_IDENTITY6 = np.eye(6)
_STRICT_LOWER6 = np.tril_indices(6, -1)
_dpotrf = lapack.dpotrf
_dposv = lapack.dposv
# Λ = A⁻¹ from A's Cholesky factor by dpotrs on the identity, not dpotri: OpenBLAS runs
# dpotri's triangular product (LAUUM) on its thread pool even at 6 × 6, and waking that pool
# on a loaded machine costs milliseconds (``ct-bench cartesian``, this 2-core machine under
# load: dpotri p99 379 µs against dpotrs' 15 µs, the law's update p99 12 ms against 0.2 ms).
_dpotrs = lapack.dpotrs
_dsyevd = lapack.dsyevd


def _six_by_six(value: tuple[float, ...]) -> FloatArray:
    """6 values (a diagonal) or 36 (a matrix, row by row) as a 6 x 6 matrix."""
    array = np.array(value, dtype=np.float64)
    return np.diag(array) if array.size == 6 else array.reshape(6, 6)


def _semi_definite(value: Any) -> str | None:
    """A validator: 6 values ≥ 0 (a diagonal), or 36 making a symmetric positive semi-definite
    matrix."""
    values = value if isinstance(value, tuple) else (value,)
    if len(values) == 6:
        return None if min(values) >= 0 else f"values must be >= 0, got {list(values)}"
    matrix = _six_by_six(values)
    scale = max(1.0, float(np.abs(matrix).max()))
    if np.abs(matrix - matrix.T).max() > SYMMETRY_TOLERANCE * scale:
        return "the 6x6 matrix (36 values, row by row) is not symmetric"
    smallest = float(np.linalg.eigvalsh(matrix)[0])
    if smallest < -SYMMETRY_TOLERANCE * scale:
        return f"the 6x6 matrix is not positive semi-definite (an eigenvalue is {smallest:.6g})"
    return None


PARAMETERS = ParameterSchema(
    "",
    (
        ParameterSpec(
            "stiffness",
            float,
            (600.0, 600.0, 600.0, 30.0, 30.0, 30.0),
            "Cartesian stiffness K in stiffness_frame axes: 6 values, the diagonal (x, y, z; "
            "rx, ry, rz), or 36, a symmetric positive semi-definite 6x6 matrix row by row",
            "N/m; N·m/rad",
            live=True,
            size=(6, 36),
            validator=_semi_definite,
        ),
        ParameterSpec(
            "stiffness_frame",
            str,
            BASE,
            "Axes K (and an explicit D) are given in: base | tcp (the TCP's, as it turns)",
            validator=one_of(*FRAMES),
        ),
        ParameterSpec(
            "damping_mode",
            str,
            RATIO,
            "ratio: D from damping_ratio and the operational-space inertia (double "
            "diagonalization); explicit: D = damping",
            validator=one_of(*DAMPING_MODES),
        ),
        ParameterSpec(
            "damping_ratio",
            float,
            1.0,
            "Damping ratio ζ of every Cartesian mode (damping_mode ratio)",
            "-",
            live=True,
            validator=non_negative,
        ),
        ParameterSpec(
            "damping",
            float,
            (40.0, 40.0, 40.0, 1.5, 1.5, 1.5),
            "Cartesian damping D (damping_mode explicit), as stiffness: 6 values or 36",
            "N·s/m; N·m·s/rad",
            live=True,
            size=(6, 36),
            validator=_semi_definite,
        ),
        ParameterSpec(
            "nullspace_stiffness",
            float,
            10.0,
            "K_n: the arm joints toward the joint reference, in the nullspace of the TCP task",
            "N·m/rad",
            live=True,
            validator=non_negative,
        ),
        ParameterSpec(
            "nullspace_damping",
            float,
            2.0,
            "D_n: joint damping in the nullspace of the TCP task",
            "N·m·s/rad",
            live=True,
            validator=non_negative,
        ),
        ParameterSpec(
            "finger_stiffness",
            float,
            100.0,
            "Joints that do not move the TCP (fingers), toward the joint reference",
            "N/m | N·m/rad",
            live=True,
            validator=non_negative,
        ),
        ParameterSpec(
            "finger_damping",
            float,
            4.0,
            "Damping of the joints that do not move the TCP (fingers)",
            "N·s/m | N·m·s/rad",
            live=True,
            validator=non_negative,
        ),
        ParameterSpec(
            "max_position_step",
            float,
            0.0005,
            "Largest move of the commanded TCP position per control tick",
            "m",
            validator=positive,
        ),
        ParameterSpec(
            "max_rotation_step",
            float,
            0.002,
            "Largest turn of the commanded TCP orientation per control tick",
            "rad",
            validator=positive,
        ),
        ParameterSpec(
            "singularity_measure",
            str,
            MANIPULABILITY,
            "manipulability (∏σᵢ of J) | condition_number (σ_max/σ_min), as the differential IK's",
            validator=one_of(*SINGULARITY_MEASURES),
        ),
        ParameterSpec(
            "singularity_threshold",
            float,
            0.01,
            "s₀: the manipulability below which (the condition number above which) λ² rises",
            "m³ | -",
            validator=positive,
        ),
        ParameterSpec(
            "max_inertia_damping",
            float,
            0.05,
            "λ_max²: added to J M⁻¹ Jᵀ at a singularity (bounds the inertia there)",
            "1/kg | 1/(kg·m²)",
            validator=non_negative,
        ),
        ParameterSpec("gravity_compensation", bool, True, "Add g(q) from the controller's model"),
        ParameterSpec(
            "coriolis_compensation", bool, False, "Add C(q, v) v from the controller's model"
        ),
    ),
)


def _default(name: str) -> Any:
    """The schema's default of ``name`` (the constructor's defaults are the schema's)."""
    return PARAMETERS.spec(name).default


class OperationalSpace(NamedTuple):
    """The operational-space terms at one configuration (arm joints, n of them):

    jacobian (6, n)       J, TCP, base axes
    inertia (6, 6)        Λ = (J M_a⁻¹ Jᵀ + λ² I)⁻¹ [kg | kg·m²]
    inverse (n, 6)        J̄ = M_a⁻¹ Jᵀ Λ, the dynamically consistent inverse
    projector (n, n)      N = I − Jᵀ J̄ᵀ
    mobility_factor (6, 6) L, lower triangular: L Lᵀ = Λ⁻¹ = J M_a⁻¹ Jᵀ + λ² I
    damping_squared       λ² [1/kg | 1/(kg·m²)] (0 away from singularities)
    manipulability        ∏σᵢ of J
    """

    jacobian: FloatArray
    inertia: FloatArray
    inverse: FloatArray
    projector: FloatArray
    mobility_factor: FloatArray
    damping_squared: float
    manipulability: float


def operational_space(
    jacobian: FloatArray,
    arm_mass: FloatArray,
    measure: str,
    threshold: float,
    max_damping_squared: float,
) -> OperationalSpace:
    """Λ, J̄ and N (:class:`OperationalSpace`) for the arm's TCP Jacobian ``jacobian`` (6 × n,
    n ≥ 6) and inertia ``arm_mass`` (n × n, symmetric positive definite), damped near
    singularities as the differential IK measures them (the module docstring)."""
    gram = jacobian.dot(jacobian.T)
    # ∏σᵢ = sqrt(det(J Jᵀ)): the product of a Cholesky diagonal (as the differential IK's).
    factor, info = _dpotrf(gram, lower=0, clean=0)
    manipulability = math.prod(factor.diagonal().tolist()) if info == 0 else 0.0
    if measure == MANIPULABILITY:
        closeness = 1.0 - manipulability / threshold
    else:
        eigenvalues = np.linalg.eigvalsh(gram)
        smallest = math.sqrt(max(float(eigenvalues[0]), 0.0))
        largest = math.sqrt(max(float(eigenvalues[-1]), 0.0))
        condition = largest / smallest if smallest > 0 else math.inf
        closeness = 1.0 - threshold / condition
    damping_squared = max_damping_squared * closeness * closeness if closeness > 0 else 0.0
    # M_a⁻¹ Jᵀ (n × 6) by one Cholesky solve; M_a is symmetric, so its transpose is the
    # Fortran-ordered matrix LAPACK takes.
    _, solved, info = _dposv(arm_mass.T, jacobian.T, lower=0)
    if info != 0:
        raise FloatingPointError(f"the arm's inertia is not positive definite (LAPACK {info})")
    mobility = jacobian.dot(solved)  # J M_a⁻¹ Jᵀ [1/kg | 1/(kg·m²)]
    if damping_squared > 0.0:
        mobility += _IDENTITY6 * damping_squared
    # Λ = A⁻¹ by Cholesky (A is symmetric positive definite), solved against the identity.
    mobility_factor, info = _dpotrf(mobility, lower=0, clean=1)
    if info != 0:
        raise FloatingPointError(f"J M⁻¹ Jᵀ is not positive definite (LAPACK {info})")
    inertia, info = _dpotrs(mobility_factor, _IDENTITY6, lower=0)
    # Symmetric to rounding; made exactly so (the damping and the projector build on it).
    inertia[_STRICT_LOWER6] = inertia.T[_STRICT_LOWER6]
    inverse = solved.dot(inertia)  # J̄
    projector = -jacobian.T.dot(inverse.T)
    projector.flat[:: jacobian.shape[1] + 1] += 1.0  # I − Jᵀ J̄ᵀ
    return OperationalSpace(
        jacobian,
        inertia,
        inverse,
        projector,
        mobility_factor.T,  # L, A = L Lᵀ (lower)
        damping_squared,
        manipulability,
    )


def ratio_damping(stiffness: FloatArray, space: OperationalSpace, ratio: float) -> FloatArray:
    """D = Λ Φ diag(2 ζ ωᵢ) Φᵀ Λ by double diagonalization: Φ the generalized eigenvectors of
    K Φ = Λ Φ diag(ω²) with Φᵀ Λ Φ = I, so that Φᵀ D Φ = diag(2 ζ ωᵢ) and each mode of
    Λ ẍ + D ẋ + K x = 0 has the damping ratio ζ. A mode without stiffness gets none.

    With the mobility A = Λ⁻¹ = L Lᵀ (Cholesky), Φ = L U for U the eigenvectors of Lᵀ K L
    (eigenvalues ω²): then Φᵀ Λ Φ = Uᵀ U = I and D = Λ L U diag(2 ζ ω) Uᵀ Lᵀ Λ — one 6 × 6
    symmetric eigenproblem."""
    lower = space.mobility_factor
    squared, rotation, info = _dsyevd(lower.T.dot(stiffness).dot(lower))
    if info != 0:
        raise FloatingPointError(f"the stiffness's modes did not converge (LAPACK {info})")
    np.maximum(squared, 0.0, out=squared)  # a mode without stiffness: ω = 0 (not NaN)
    frequencies = np.sqrt(squared, out=squared)  # [rad/s]
    modes = space.inertia.dot(lower).dot(rotation)  # Λ Φ
    return (modes * (2.0 * ratio * frequencies)).dot(modes.T)


def _rotated(matrix: FloatArray, rotation: FloatArray) -> FloatArray:
    """R̂ A R̂ᵀ with R̂ = diag(R, R): a 6 × 6 stiffness or damping from TCP to base axes."""
    full = np.zeros((6, 6))
    full[:3, :3] = rotation
    full[3:, 3:] = rotation
    return full.dot(matrix).dot(full.T)


def _block(
    index: NDArray[np.intp],
) -> tuple[slice | NDArray[np.intp], slice | NDArray[np.intp]]:
    """(rows, columns) selecting the ``index`` block of an nv × nv matrix: basic slices when the
    indices are contiguous (a view, no copy), else ``np.ix_``'s."""
    if index.size and np.array_equal(index, np.arange(index[0], index[0] + index.size)):
        whole = slice(int(index[0]), int(index[0]) + index.size)
        return whole, whole
    rows, columns = np.ix_(index, index)
    return rows, columns


_CLEAR = object()  # a staged "no Cartesian target"


class CartesianImpedanceController(Controller):
    """See the module docstring. Takes a Cartesian target (:attr:`ACCEPTS`); with none, the
    forward kinematics of the loop's joint reference."""

    PARAMETERS = PARAMETERS
    ACCEPTS = frozenset({CARTESIAN})
    # The live gains as validated (validate_gains): a 6 x 6 matrix row by row (36,) in
    # stiffness_frame axes, the scalars as (1,) arrays.
    stiffness: FloatArray
    damping: FloatArray
    damping_ratio: FloatArray
    nullspace_stiffness: FloatArray
    nullspace_damping: FloatArray
    finger_stiffness: FloatArray
    finger_damping: FloatArray

    def __init__(
        self,
        model: RobotModel,
        stiffness: object = _default("stiffness"),
        damping_ratio: float = _default("damping_ratio"),
        damping: object = _default("damping"),
        nullspace_stiffness: float = _default("nullspace_stiffness"),
        nullspace_damping: float = _default("nullspace_damping"),
        finger_stiffness: float = _default("finger_stiffness"),
        finger_damping: float = _default("finger_damping"),
        *,
        stiffness_frame: str = _default("stiffness_frame"),
        damping_mode: str = _default("damping_mode"),
        max_position_step: float = _default("max_position_step"),
        max_rotation_step: float = _default("max_rotation_step"),
        singularity_measure: str = _default("singularity_measure"),
        singularity_threshold: float = _default("singularity_threshold"),
        max_inertia_damping: float = _default("max_inertia_damping"),
        gravity_compensation: bool = _default("gravity_compensation"),
        coriolis_compensation: bool = _default("coriolis_compensation"),
    ) -> None:
        """Gains as their specs in :data:`PARAMETERS` say (a stiffness or damping may also be a
        6 × 6 array); :class:`GainError` names a bad one."""
        super().__init__()
        self.model = model
        read_only = {
            "stiffness_frame": stiffness_frame,
            "damping_mode": damping_mode,
            "max_position_step": max_position_step,
            "max_rotation_step": max_rotation_step,
            "singularity_measure": singularity_measure,
            "singularity_threshold": singularity_threshold,
            "max_inertia_damping": max_inertia_damping,
            "gravity_compensation": gravity_compensation,
            "coriolis_compensation": coriolis_compensation,
        }
        for name, value in read_only.items():
            try:
                PARAMETERS.spec(name).check(value)
            except ValueError as problem:
                raise GainError(f"{name}: {problem}") from None
        if singularity_measure == CONDITION_NUMBER and singularity_threshold < 1:
            raise GainError(
                f"singularity_threshold: a condition number is ≥ 1, got {singularity_threshold}"
            )
        self.stiffness_frame = stiffness_frame
        self.damping_mode = damping_mode
        self.max_position_step = float(max_position_step)
        self.max_rotation_step = float(max_rotation_step)
        self.singularity_measure = singularity_measure
        self.singularity_threshold = float(singularity_threshold)
        self.max_inertia_damping = float(max_inertia_damping)
        self.gravity_compensation = gravity_compensation
        self.coriolis_compensation = coriolis_compensation
        self._tcp = model.tcp_frame_id  # NoTcpError on a model without one
        pin_model = model.model
        support = pin_model.supports[pin_model.frames[self._tcp].parentJoint]
        moving = {str(pin_model.names[j]) for j in support}
        self.arm_joints = tuple(n for n in model.joint_names if n in moving)
        self.other_joints = tuple(n for n in model.joint_names if n not in moving)
        if len(self.arm_joints) < 6:
            raise GainError(
                f"Cartesian impedance needs at least 6 joints moving the TCP; "
                f"{model.tcp_frame} moves with {len(self.arm_joints)} "
                f"({', '.join(self.arm_joints)})"
            )
        self._arm = model.indices(self.arm_joints)
        self._other = model.indices(self.other_joints)
        self._arm_block = _block(self._arm)
        self.base_frame = pin_model.frames[model.base_frame_id].name
        gains = self.validate_gains(
            {
                "stiffness": stiffness,
                "damping_ratio": damping_ratio,
                "damping": damping,
                "nullspace_stiffness": nullspace_stiffness,
                "nullspace_damping": nullspace_damping,
                "finger_stiffness": finger_stiffness,
                "finger_damping": finger_damping,
            }
        )
        self.apply_gains(gains)
        self.model_state: ModelState = ModelState(model)
        self._reference_state = ModelState(model)  # FK of the joint reference
        # The target handed over from other threads (set_target / clear_target / prepare),
        # taken at the next tick.
        self._target_lock = threading.Lock()
        self._pending: object = None  # a CartesianTarget, _CLEAR, or None: nothing new
        self._restart_pending = False
        self._target: CartesianTarget | None = None  # the control thread's
        self._commanded: FloatArray | None = None  # (4, 4) the commanded pose
        self._last_stamp = -math.inf

    # --- parameters ------------------------------------------------------------------------
    @classmethod
    def from_parameters(
        cls, model: RobotModel, joint_names: tuple[str, ...], params: Mapping[str, object]
    ) -> CartesianImpedanceController:
        """Build from controllers.yaml entries, checked against :data:`PARAMETERS`
        (:meth:`Controller.check_parameters`; none is per joint)."""
        values = cls.check_parameters(model, joint_names, params)
        return cls(model, **values)

    def validate_gains(self, gains: Mapping[str, object]) -> dict[str, FloatArray]:
        """The schema's checks (:meth:`Controller.validate_gains`), a stiffness or damping also
        as a 6 × 6 array; each comes back as its 6 × 6 matrix flattened (36 values, row by row)
        whichever way it was given, the scalars as 1-element arrays."""
        given = {
            name: np.asarray(value, dtype=np.float64).reshape(-1).tolist()
            if name in ("stiffness", "damping") and isinstance(value, np.ndarray)
            else value
            for name, value in gains.items()
        }
        checked = super().validate_gains(given)
        for name in ("stiffness", "damping"):
            if name in checked:
                checked[name] = _six_by_six(tuple(checked[name].tolist())).reshape(-1)
        return checked

    def apply_gains(self, gains: Mapping[str, FloatArray]) -> None:
        for name, value in gains.items():
            setattr(self, name, value.copy())
        self._stiffness_matrix = self.stiffness.reshape(6, 6)
        self._damping_matrix = self.damping.reshape(6, 6)
        self._values = self._scalars(gains)

    def _scalars(self, gains: Mapping[str, FloatArray]) -> tuple[float, float, float, float, float]:
        """(ζ, K_n, D_n, K_f, D_f) as floats, from ``gains`` where given, else the current."""

        def value(name: str) -> float:
            return float(np.asarray(gains.get(name, getattr(self, name))).reshape(-1)[0])

        return (
            value("damping_ratio"),
            value("nullspace_stiffness"),
            value("nullspace_damping"),
            value("finger_stiffness"),
            value("finger_damping"),
        )

    def gain_labels(self, name: str, size: int) -> tuple[str, ...]:
        """A 6 × 6 gain's entries by axes (``x``, ``rx/x``, ...); a scalar by its name."""
        if size == 36:
            return tuple(a if a == b else f"{a}/{b}" for a in AXES for b in AXES)
        if size == 1:
            return (name,)
        return super().gain_labels(name, size)

    # --- the target ------------------------------------------------------------------------
    def set_target(self, target: CartesianTarget, checked: bool = False) -> None:
        """Track ``target`` (pose [m] of the TCP in the base frame, optional twist [m/s; rad/s]
        and wrench [N; N·m] feed-forward in base axes) from the next tick, through the step
        bounds. Checked here (:class:`~ct_controllers.references.reference_generator.
        TargetError` naming what is wrong; nothing changes then) unless ``checked``: the
        caller's own :meth:`CartesianTarget.validated` result against this base frame, whose
        arrays it hands over (a chain checks its target once, at its boundary); any thread."""
        if not checked:
            target = target.validated(self.base_frame)  # arrays of its own ...
        checked_target = target
        for array in (checked_target.pose, checked_target.twist, checked_target.wrench):
            if array is not None:
                array.setflags(write=False)  # ... read-only: `target` hands them out
        with self._target_lock:
            self._pending = checked_target

    def clear_target(self, only: CartesianTarget | None = None) -> None:
        """Track the forward kinematics of the loop's joint reference again (through the step
        bounds) from the next tick; any thread. ``only``: clear only if the target handed over
        last is this one (the same object): a chain ending does not clear the target a newer
        chain has handed the controller meanwhile."""
        with self._target_lock:
            if only is not None:
                last = self._target if self._pending is None else self._pending
                if last is not only:
                    return
            self._pending = _CLEAR

    @property
    def target(self) -> CartesianTarget | None:
        """The Cartesian target the control thread tracks (None: the joint reference's FK)."""
        return self._target

    @property
    def commanded_pose(self) -> FloatArray | None:
        """The commanded TCP pose (4 × 4, base frame) of the last tick (a copy), or None."""
        return None if self._commanded is None else self._commanded.copy()

    def prepare(self, state: JointState, dt: float) -> None:
        """On activation: the first tick restarts the commanded pose from the measured TCP
        pose (nothing else is touched: the loop may still run this controller)."""
        with self._target_lock:
            self._restart_pending = True

    def _take_pending(self) -> bool:
        """Install what other threads handed over; whether the commanded pose restarts."""
        with self._target_lock:
            pending, self._pending = self._pending, None
            restart, self._restart_pending = self._restart_pending, False
        if pending is _CLEAR:
            self._target = None
        elif isinstance(pending, CartesianTarget):
            self._target = pending
        return restart

    # --- the law ---------------------------------------------------------------------------
    def _operational_space(self, jacobian: FloatArray, mass: FloatArray) -> OperationalSpace:
        rows, columns = self._arm_block
        return operational_space(
            jacobian[:, columns],
            mass[rows, columns],
            self.singularity_measure,
            self.singularity_threshold,
            self.max_inertia_damping,
        )

    def _cartesian_gains(
        self,
        rotation: FloatArray,
        space: OperationalSpace,
        stiffness: FloatArray,
        damping: FloatArray,
        ratio: float,
    ) -> tuple[FloatArray, FloatArray]:
        """(K, D) in base axes at the TCP rotation ``rotation``."""
        if self.stiffness_frame == TCP:
            stiffness = _rotated(stiffness, rotation)
            damping = _rotated(damping, rotation)
        if self.damping_mode == RATIO:
            damping = ratio_damping(stiffness, space, ratio)
        return stiffness, damping

    def _step_toward(self, commanded: FloatArray, desired: FloatArray) -> FloatArray:
        """The commanded pose moved toward ``desired`` within the step bounds (a new array)."""
        out = desired.copy()
        offset = desired[:3, 3] - commanded[:3, 3]
        x, y, z = offset.tolist()
        distance = math.sqrt(x * x + y * y + z * z)
        if distance > self.max_position_step:
            out[:3, 3] = commanded[:3, 3] + offset * (self.max_position_step / distance)
        turn = pin.log3(desired[:3, :3].dot(commanded[:3, :3].T))
        x, y, z = turn.tolist()
        angle = math.sqrt(x * x + y * y + z * z)
        if angle > self.max_rotation_step:
            out[:3, :3] = pin.exp3(turn * (self.max_rotation_step / angle)).dot(commanded[:3, :3])
        return out

    def compute(self, state: JointState, reference: JointReference, dt: float) -> FloatArray:
        restart = False
        if self._pending is not None or self._restart_pending:  # (a read: the lock is below)
            restart = self._take_pending()
        stamp = float(state.stamp)
        if not (0.0 <= stamp - self._last_stamp <= RESTART_GAP):
            restart = True  # the first tick, or one after the controller was not run
        self._last_stamp = stamp
        evaluated = self.model_state.at(state)
        full_jacobian = evaluated.frame_jacobian(self._tcp)
        rotation, position = evaluated.frame_placement(self._tcp)
        arm, other = self._arm, self._other
        # The desired pose and its feed-forward: the Cartesian target, or the joint
        # reference's forward kinematics.
        target = self._target
        wrench = None
        if target is not None:
            desired = target.pose
            twist = target.twist
            wrench = target.wrench
        else:
            at_reference = self._reference_state.update(reference.q, reference.v)
            twist = at_reference.frame_jacobian(self._tcp).dot(reference.v)  # places it too
            desired = at_reference.frame_pose(self._tcp)
        if restart or self._commanded is None:
            self._commanded = evaluated.frame_pose(self._tcp).copy()
        commanded = self._step_toward(self._commanded, desired)
        self._commanded = commanded
        error = np.empty(6)
        error[:3] = commanded[:3, 3] - position
        error[3:] = pin.log3(commanded[:3, :3].dot(rotation.T))
        space = self._operational_space(full_jacobian, evaluated.mass_matrix())
        ratio, null_k, null_d, finger_k, finger_d = self._values
        stiffness, damping = self._cartesian_gains(
            rotation, space, self._stiffness_matrix, self._damping_matrix, ratio
        )
        jacobian = space.jacobian
        v_arm = state.v[arm]
        velocity_error = -jacobian.dot(v_arm)
        if twist is not None:
            velocity_error += twist
        force = stiffness.dot(error) + damping.dot(velocity_error)
        if wrench is not None:
            force += wrench
        posture = null_k * (reference.q[arm] - state.q[arm]) - null_d * v_arm
        tau = np.zeros(self.model.nv)
        tau[arm] = jacobian.T.dot(force) + space.projector.dot(posture)
        tau[other] = finger_k * (reference.q[other] - state.q[other]) + finger_d * (
            reference.v[other] - state.v[other]
        )
        if self.gravity_compensation and self.coriolis_compensation:
            tau += evaluated.bias()
        elif self.gravity_compensation:
            tau += evaluated.gravity()
        elif self.coriolis_compensation:
            tau += evaluated.bias()
            tau -= evaluated.gravity()
        if reference.effort is not None:
            tau += reference.effort
        return tau

    def linear_feedback(
        self,
        q: FloatArray,
        gains: Mapping[str, FloatArray] | None = None,
        model: RobotModel | None = None,
    ) -> tuple[FloatArray, FloatArray]:
        """(K_q, D_q) at an equilibrium at ``q`` (the module docstring): Jᵀ K J + K_n N and
        Jᵀ D J + D_n N on the arm joints, K_f and D_f on the others."""
        gains = gains or {}
        model = model or self.model
        q = np.asarray(q, dtype=np.float64)
        jacobian = model.frame_jacobian(q)
        rotation = model.frame_pose(q)[:3, :3]
        space = self._operational_space(jacobian, model.mass_matrix(q))
        ratio, null_k, null_d, finger_k, finger_d = self._scalars(gains)
        stiffness = np.asarray(gains.get("stiffness", self.stiffness)).reshape(6, 6)
        damping = np.asarray(gains.get("damping", self.damping)).reshape(6, 6)
        stiffness, damping = self._cartesian_gains(rotation, space, stiffness, damping, ratio)
        arm, other = self._arm, self._other
        arm_block = np.ix_(arm, arm)
        nv = model.nv
        joint_stiffness, joint_damping = np.zeros((nv, nv)), np.zeros((nv, nv))
        task = space.jacobian
        joint_stiffness[arm_block] = task.T.dot(stiffness).dot(task) + null_k * space.projector
        joint_damping[arm_block] = task.T.dot(damping).dot(task) + null_d * space.projector
        joint_stiffness[other, other] = finger_k
        joint_damping[other, other] = finger_d
        return joint_stiffness, joint_damping
