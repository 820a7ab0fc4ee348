"""nn.Cell: the C++ Cell, subclassable in Python.

A Python subclass defines construct(); setting a Parameter or a Cell as an attribute registers
it with the C++ cell under the attribute's name, so dotted parameter names, train/eval mode,
checkpoints, Model.train and DistributedDataParallel work for Python cells exactly as for C++
ones (the C++ side calls construct() for a Python cell's forward).

Built-in layers (Conv2d, Dense, ...) are C++ cells created in __new__ and given their Python
class (layers.py); they compute without entering Python.
"""

from collections import OrderedDict

from zenith import _zenith as _C
from zenith._tensor import Parameter, Tensor

__all__ = ["Cell", "CellList", "SequentialCell"]


def _adopt(cell):
    """A C++ cell the Python side has no object for yet, given its Python class (by its C++
    type name; unknown types become a generic Cell whose construct is the C++ forward)."""
    if cell is None or type(cell) is not _C.nn.Cell:
        return cell
    from zenith.nn import layers
    cell.__class__ = layers.builtin_class(cell._cpp_type_name())
    return cell


class Cell(_C.nn.Cell):
    """The base of every network (MindSpore's nn.Cell).

    Subclass it, set layers and Parameters as attributes in __init__ (calling
    super().__init__() as MindSpore asks; the C++ cell exists already) and define
    construct(*inputs). Calling the cell calls construct.

        class Net(nn.Cell):
            def __init__(self):
                super().__init__()
                self.dense = nn.Dense(4, 2)
                self.scale = zenith.Parameter(zenith.Tensor([2.0]))
            def construct(self, x):
                return self.dense(x) * self.scale
    """

    # No new slots: built-in layers made by C++ take their Python class by __class__
    # assignment, which needs the same layout as the C++ class (see layers.py).
    __slots__ = ()

    def __new__(cls, *args, **kwargs):
        # The C++ cell exists before the subclass's __init__ runs, so attributes set before
        # (or without) super().__init__() register like any other.
        self = _C.nn.Cell.__new__(cls)
        _C.nn.Cell.__init__(self)
        return self

    def __init__(self, auto_prefix=True, flags=None):
        pass

    # ---- what the C++ side calls
    def _type_name(self):
        return type(self).__name__

    def construct(self, *inputs, **kwargs):
        """The forward computation; subclasses define it."""
        raise NotImplementedError(f"{type(self).__name__} does not define construct()")

    def __call__(self, *args, **kwargs):
        return self.construct(*args, **kwargs)

    # ---- attributes: Parameters and Cells are registered with the C++ cell
    def __setattr__(self, name, value):
        if isinstance(value, (Parameter, Cell)) and not name.startswith("_"):
            if isinstance(value, Parameter):
                self._set_parameter(name, value, value.requires_grad)
                if value.name is None:
                    value.name = name
            else:
                self._set_cell(name, value)
        elif value is None and name in self.__dict__ and isinstance(
                self.__dict__[name], (Parameter, Cell)):
            self._remove_entry(name)
        object.__setattr__(self, name, value)

    def __delattr__(self, name):
        if isinstance(self.__dict__.get(name), (Parameter, Cell)):
            self._remove_entry(name)
        object.__delattr__(self, name)

    def __getattr__(self, name):
        # Only reached when normal lookup fails: the parameters and children of built-in
        # layers and of cells made in C++ (conv.weight, seq["0"]).
        if name.startswith("__"):
            raise AttributeError(name)
        for n, t in _C.nn.Cell._named_parameters(self):
            if n == name:
                return Parameter._wrap(t, n)
        for n, t in _C.nn.Cell._named_buffers(self):  # BatchNorm2d's running statistics
            if n == name:
                return t
        for n, c in _C.nn.Cell._named_children(self):
            if n == name:
                return _adopt(c)
        raise AttributeError(f"{type(self).__name__!r} has no attribute {name!r}")

    # ---- parameters
    def parameters_and_names(self, name_prefix="", expand=True):
        """(dotted name, Parameter) for every parameter (own only when expand is False)."""
        for n, t in self._named_parameters():
            if expand or "." not in n:
                full = f"{name_prefix}.{n}" if name_prefix else n
                yield full, Parameter._wrap(t, full)

    def get_parameters(self, expand=True):
        """Every Parameter (own only when expand is False)."""
        for _, p in self.parameters_and_names(expand=expand):
            yield p

    def trainable_params(self, recurse=True):
        """The parameters that require gradients, in registration order."""
        return [p for p in self.get_parameters(recurse) if p.requires_grad]

    def untrainable_params(self, recurse=True):
        """The parameters that do not require gradients."""
        return [p for p in self.get_parameters(recurse) if not p.requires_grad]

    def parameters_dict(self, recurse=True):
        """OrderedDict of dotted name -> Parameter."""
        return OrderedDict(self.parameters_and_names(expand=recurse))

    def num_parameters(self, trainable_only=False):
        """Total number of parameter elements."""
        return self._num_parameters(trainable_only)

    # ---- sub-cells
    def name_cells(self):
        """OrderedDict of the direct children by name."""
        return OrderedDict((n, _adopt(c)) for n, c in self._named_children())

    def cells(self):
        """The direct children."""
        return list(self.name_cells().values())

    def cells_and_names(self, cell_name=""):
        """(dotted name, cell) for this cell and every descendant, depth first."""
        yield cell_name, self
        for n, c in self._named_children():
            yield from _adopt(c).cells_and_names(f"{cell_name}.{n}" if cell_name else n)

    def insert_child_to_cell(self, child_name, child_cell):
        """Registers child_cell under child_name (as setting the attribute does)."""
        setattr(self, child_name, child_cell)

    # ---- modes and dtypes
    def set_train(self, mode=True):
        """Training mode (dropout active, batch statistics) for this cell and its children."""
        self._set_train(bool(mode))
        return self

    def set_grad(self, requires_grad=True):
        """Accepted for MindSpore programs; gradients are always recorded as needed."""
        return self

    def to_float(self, dst_type):
        """Runs the cell in dst_type: its floating parameters and buffers are converted in
        place, and calling it casts its floating inputs to dst_type (as MindSpore's to_float),
        so its output is dst_type. Only calls through Python see the input cast: a built-in
        layer inside a SequentialCell chain is called by C++ directly."""
        self._to(dst_type)
        from zenith.amp import cast_calls
        return cast_calls(self, dst_type, None)

    def state_dict(self):
        """OrderedDict of every parameter and buffer by dotted name (sharing memory)."""
        return OrderedDict(sorted(self._state_dict().items()))

    def extend_repr(self):
        """Extra text in this cell's repr (subclasses may override)."""
        return ""

    def __repr__(self):
        """MindSpore's form: Name<extra> for a leaf; a cell with children lists them, one
        '(name): repr' per line, indented, and closes with '>'."""
        extra = self.extend_repr()
        children = list(self.name_cells().items())
        if not children:
            return f"{type(self).__name__}<{extra}>"
        body = "\n" + (f"{extra}\n" if extra else "")
        body += "".join(f"({name}): {child!r}\n" for name, child in children)
        return f"{type(self).__name__}<" + body.replace("\n", "\n  ") + ">"


class CellList(Cell):
    """A list of cells registered as children "0", "1", ... (MindSpore's nn.CellList)."""

    def __init__(self, args=None, **kwargs):
        super().__init__()
        object.__setattr__(self, "_list", [])
        for c in args or []:
            self.append(c)

    def append(self, cell):
        """Adds a cell at the end."""
        if not isinstance(cell, Cell):
            raise TypeError(f"CellList takes Cells, got {type(cell).__name__}")
        self._set_cell(str(len(self._list)), cell)
        self._list.append(cell)

    def extend(self, cells):
        """Adds cells at the end."""
        for c in cells:
            self.append(c)

    def __getitem__(self, index):
        return self._list[index]

    def __len__(self):
        return len(self._list)

    def __iter__(self):
        return iter(self._list)

    def construct(self, *inputs):
        raise NotImplementedError("CellList has no construct(); iterate over it")


def _cells_arg(args):
    if len(args) == 1 and isinstance(args[0], (list, tuple)):
        return list(args[0])
    if len(args) == 1 and isinstance(args[0], OrderedDict):
        raise TypeError("SequentialCell: an OrderedDict is not supported; pass the cells in order "
                        "(they are named 0, 1, ...)")
    return list(args)


def _no_strategy(cell, i):
    """A Dense with a shard strategy runs it from Python; SequentialCell's C++ chain would not."""
    d = getattr(cell, "__dict__", None)
    if d is None or not hasattr(type(cell), "matmul"):  # nn.Dense only
        return
    if d.get("_tp") is not None:
        from zenith._unsupported import UnsupportedError
        raise UnsupportedError(f"SequentialCell: item {i} is a Dense sharded with strategy "
                               f"{d['_tp']['strategy']}; call it from a Cell's construct")
    object.__setattr__(cell, "_in_sequential", True)


class SequentialCell(Cell):
    """Cells applied in order (MindSpore's nn.SequentialCell): SequentialCell(c1, c2, ...) or
    SequentialCell([c1, c2, ...]); children are named "0", "1", .... The chain runs in C++
    (Python cells in it are called back)."""

    __slots__ = ()

    def __new__(cls, *args, **kwargs):
        cells = _cells_arg(args)
        for i, c in enumerate(cells):
            if not isinstance(c, Cell):
                raise TypeError(f"SequentialCell: item {i} is {type(c).__name__}, not a Cell")
            _no_strategy(c, i)
        seq = _C.nn.SequentialCell(cells)
        seq.__class__ = cls
        object.__setattr__(seq, "_cells", cells)  # keeps the Python cells alive
        return seq

    def __init__(self, *args, **kwargs):
        pass

    __call__ = _C.nn.Cell._forward

    def construct(self, x):
        return self._forward(x)

    def _list(self):
        cells = self.__dict__.get("_cells")
        if cells is None:  # made in C++ (the model zoo)
            cells = [_adopt(c) for _, c in self._named_children()]
            object.__setattr__(self, "_cells", cells)
        return cells

    def append(self, cell):
        """Adds a cell at the end."""
        if not isinstance(cell, Cell):
            raise TypeError(f"SequentialCell: append takes a Cell, got {type(cell).__name__}")
        _C.nn._sequential_append(self, cell)
        self._list().append(cell)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return SequentialCell(self._list()[index])
        return self._list()[index]

    def __len__(self):
        return len(self._list())

    def __iter__(self):
        return iter(self._list())
