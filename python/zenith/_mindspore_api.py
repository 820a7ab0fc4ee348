"""MindSpore's public API lists and zenith's coverage of them (docs/mindspore.md's table).

The names are those of MindSpore's API reference (mindspore-ai/mindspore,
docs/api/api_python_en/*.rst, as stored at the commits named in SOURCES); each is looked up on
the zenith module of the same path. `python3 -m zenith._mindspore_api` prints the table;
tests/python/test_mindspore_coverage.py checks docs/mindspore.md holds the current one.
"""

import importlib

SOURCES = {
    "mindspore": "mindspore.rst @ 00e433dd",
    "mindspore.nn": "mindspore.nn.rst @ 00e433dd",
    "mindspore.ops (functions)": "mindspore.ops.function.rst @ 04578768",
    "mindspore.ops (primitives)": "mindspore.ops.rst @ 00e433dd",
    "mindspore.dataset": "mindspore.dataset.rst @ 08bb2fa7",
    "mindspore.amp": "mindspore.amp.rst @ 2174ae67",
    "mindspore.train": "mindspore.train.rst @ 0968bdd0",
}

# Names that need Ascend/GPU hardware, MindSpore's compiler internals or its cloud services:
# they do not apply to a CPU framework and are left out of the percentages.
NOT_CPU = set("""
RowTensor SparseTensor set_ps_context get_ps_context reset_ps_context set_algo_parameters
get_algo_parameters reset_algo_parameters async_ckpt_thread_status build_searched_strategy
convert_model load_distributed_checkpoint merge_sliced_parameter restore_group_info_list
ms_memory_recycle ConvertModelUtils ConvertNetUtils set_dump SummaryLandscape issubclass_
get_py_obj_dtype DatasetHelper connect_network_with_dataset GetNextSingleOp PipelineCell
MicroBatchInterleaved ParameterUpdate AdaSumByDeltaWeightWrapCell AdaSumByGradWrapCell thor
AdamOffload SyncBatchNorm PrimitiveWithCheck PrimitiveWithInfer custom_info_register ms_kernel
op_info_register prim_attr_register AiCPURegOp CustomRegOp DataType TBERegOp get_vm_impl_fn
Custom NPUAllocFloatStatus NPUClearFloatStatus NPUGetFloatStatus FloatStatus GetNext
DropoutDoMask DropoutGenMask DynamicGRUV2 DynamicRNN BasicLSTMCell ReLUV2 CheckBprop
IsInstance IsSubClass Depend HookBackward HyperMap InsertGradientOf Map MultitypeFuncGraph
Partial GradOperation ScalarCast ScalarToArray ScalarToTensor TupleToArray DType DynamicShape
ParallelConcat SparseGatherV2 FusedSparseAdam FusedSparseFtrl FusedSparseLazyAdam
FusedSparseProximalAdagrad LARSUpdate AdamNoUpdateParam NeighborExchange NeighborExchangeV2
HistogramSummary ImageSummary ScalarSummary TensorSummary core scalar_cast scalar_to_array
scalar_to_tensor tuple_to_array dyn_shape jet derivative OBSMindDataset
FlopsUtilizationCollector OnRequestExit BackupAndRestore init_status
""".split())

LISTS = {
    "mindspore": ("zenith", """
Tensor COOTensor CSRTensor RowTensor SparseTensor Parameter ParameterTuple dtype_to_nptype
issubclass_ dtype_to_pytype pytype_to_dtype get_py_obj_dtype set_seed get_seed set_context
get_context set_auto_parallel_context get_auto_parallel_context reset_auto_parallel_context
ParallelMode set_ps_context get_ps_context reset_ps_context set_algo_parameters
get_algo_parameters reset_algo_parameters Model Callback CheckpointConfig EarlyStopping History
LambdaCallback LearningRateScheduler LossMonitor ModelCheckpoint ReduceLROnPlateau RunContext
TimeMonitor DatasetHelper connect_network_with_dataset async_ckpt_thread_status
build_searched_strategy convert_model export load load_checkpoint load_distributed_checkpoint
load_param_into_net merge_sliced_parameter parse_print restore_group_info_list save_checkpoint
JitConfig ms_function ms_class mutable jit jit_class get_level get_log_config run_check Profiler
SummaryCollector SummaryLandscape SummaryRecord set_dump ms_memory_recycle ConvertModelUtils
ConvertNetUtils value_and_grad grad float16 float32 float64 int8 int16 int32 int64 uint8
bool_ STRICT
"""),
    "mindspore.nn": ("zenith.nn", """
Cell GraphCell LossBase Optimizer CellList SequentialCell DistributedGradReducer
DynamicLossScaleUpdateCell FixedLossScaleUpdateCell ForwardValueAndGrad GetNextSingleOp
MicroBatchInterleaved ParameterUpdate PipelineCell TimeDistributed TrainOneStepCell
TrainOneStepWithLossScaleCell WithEvalCell WithGradCell WithLossCell Conv1d Conv1dTranspose
Conv2d Conv2dTranspose Conv3d Conv3dTranspose Unfold RNN RNNCell GRU GRUCell LSTM LSTMCell
Embedding EmbeddingLookup MultiFieldEmbeddingLookup CELU ELU FastGelu GELU get_activation
Hardtanh HShrink HSigmoid HSwish LeakyReLU LogSigmoid LogSoftmax LRN Mish Softsign PReLU ReLU
ReLU6 RReLU SeLU SiLU Sigmoid Softmin Softmax SoftShrink Tanh Tanhshrink Threshold Dense
BiDense Dropout Dropout2d Dropout3d BatchNorm1d BatchNorm2d BatchNorm3d GroupNorm
InstanceNorm1d InstanceNorm2d InstanceNorm3d LayerNorm SyncBatchNorm AdaptiveAvgPool1d
AdaptiveAvgPool2d AdaptiveAvgPool3d AdaptiveMaxPool1d AdaptiveMaxPool2d AdaptiveMaxPool3d
AvgPool1d AvgPool2d MaxPool1d MaxPool2d Pad ConstantPad1d ConstantPad2d ConstantPad3d
ReflectionPad1d ReflectionPad2d ZeroPad2d BCELoss BCEWithLogitsLoss CosineEmbeddingLoss
CrossEntropyLoss DiceLoss FocalLoss HuberLoss L1Loss MAELoss MSELoss MultiClassDiceLoss NLLLoss
RMSELoss SampledSoftmaxLoss SmoothL1Loss SoftMarginLoss SoftmaxCrossEntropyWithLogits Adadelta
Adagrad Adam AdaMax AdamOffload AdamWeightDecay AdaSumByDeltaWeightWrapCell
AdaSumByGradWrapCell ASGD FTRL Lamb LARS LazyAdam Momentum ProximalAdagrad RMSProp Rprop SGD
thor CosineDecayLR ExponentialDecayLR InverseDecayLR NaturalExpDecayLR PolynomialDecayLR
WarmUpLR cosine_decay_lr exponential_decay_lr inverse_decay_lr natural_exp_decay_lr
piecewise_constant_lr polynomial_decay_lr warmup_lr CentralCrop ImageGradients MSSSIM PSNR
ResizeBilinear SSIM MatrixDiag MatrixDiagPart MatrixSetDiag ClipByNorm Flatten L1Regularizer
Norm OneHot Range Roll Tril Triu Moments
"""),
    "mindspore.ops (functions)": ("zenith.ops", """
adaptive_avg_pool1d adaptive_avg_pool2d adaptive_avg_pool3d adaptive_max_pool1d
adaptive_max_pool3d avg_pool1d avg_pool2d avg_pool3d batch_norm bias_add conv2d conv3d
ctc_greedy_decoder crop_and_resize deformable_conv2d dropout2d dropout3d flatten interpolate
lrn max_pool3d kl_div pad padding pdist prelu relu relu6 binary_cross_entropy
binary_cross_entropy_with_logits cross_entropy nll_loss smooth_l1_loss celu dropout fast_gelu
gumbel_softmax hardshrink hardswish log_softmax mish selu softsign soft_shrink softmax tanh
grid_sample uniform_candidate_sampler cdist bmm cholesky cholesky_inverse abs accumulate_n acos
acosh add addn asin asinh atan atan2 atanh bernoulli bessel_i0 bessel_i0e bessel_i1 bessel_i1e
bessel_j0 bessel_j1 bessel_k0 bessel_k0e bessel_k1 bessel_k1e bessel_y0 bessel_y1 bitwise_and
bitwise_or bitwise_xor ceil cos cosh div erf erfc exp expm1 floor floor_div floor_mod inv invert
lerp log log1p logical_and logical_not logical_or logit log_matrix_determinant
matrix_determinant mul neg pow round sin sinh sqrt square sub svd tan trunc truncate_div
truncate_mod xdivy xlogy amax amin argmax argmin cummax cummin logsumexp max mean median min
norm prod std approximate_equal equal ge gt intopk isclose isfinite isnan le less maximum
minimum ne same_type_shape batch_dot dot matmul matrix_solve ger renorm tensor_dot eye fill
fills linspace narrow one_hot ones ones_like zeros_like choice_with_mask gamma laplace
multinomial random_poisson random_categorical random_gamma shuffle standard_laplace
standard_normal uniform adaptive_max_pool2d affine_grid batch_to_space_nd broadcast_to col2im
concat count_nonzero diag dyn_shape expand expand_dims gather gather_d gather_elements gather_nd
index_add index_fill inplace_add inplace_sub inplace_update masked_fill masked_select
matrix_band_part matrix_diag matrix_diag_part matrix_set_diag meshgrid normal nonzero
population_count range rank repeat_elements reshape reverse_sequence scatter_nd select
sequence_mask shape size slice space_to_batch_nd sparse_segment_mean split squeeze stack
strided_slice tensor_scatter_add tensor_scatter_min tensor_scatter_max tensor_scatter_div
tensor_scatter_mul tensor_scatter_sub tensor_scatter_elements tile top_k transpose unique
unique_consecutive unique_with_pad unsorted_segment_max unsorted_segment_min
unsorted_segment_prod unsorted_segment_sum unstack scalar_cast scalar_to_array scalar_to_tensor
tuple_to_array dense_to_sparse_coo dense_to_sparse_csr csr_add csr_softmax csr_to_coo
sparse_add clip_by_global_norm clip_by_value assign assign_add assign_sub scatter_add
scatter_div scatter_min scatter_max scatter_mul scatter_nd_add scatter_nd_div scatter_nd_max
scatter_nd_min scatter_nd_mul scatter_nd_sub scatter_update derivative grad value_and_grad
jacfwd jacrev jet jvp vjp vmap print_ bounding_box_decode bounding_box_encode check_valid iou
blackman_window core
"""),
    "mindspore.ops (primitives)": ("zenith.ops", """
Primitive PrimitiveWithCheck PrimitiveWithInfer constexpr custom_info_register ms_kernel
op_info_register prim_attr_register AvgPool AvgPool3D BasicLSTMCell BatchNorm Conv2D
Conv2DBackpropInput Conv2DTranspose Conv3D Conv3DTranspose CTCGreedyDecoder
DepthwiseConv2dNative Dropout Dropout2D Dropout3D DropoutDoMask DropoutGenMask DynamicGRUV2
DynamicRNN Flatten LayerNorm LRN LSTM MaxPool MaxPool3D MaxPoolWithArgmax MirrorPad Pad
EmbeddingLookup Padding ResizeNearestNeighbor ResizeBilinear BCEWithLogitsLoss
BinaryCrossEntropy CTCLoss KLDivLoss L2Loss NLLLoss RNNTLoss SigmoidCrossEntropyWithLogits
SmoothL1Loss SoftMarginLoss SoftmaxCrossEntropyWithLogits SparseSoftmaxCrossEntropyWithLogits Elu
FastGeLU GeLU HShrink HSigmoid HSwish LogSoftmax Mish PReLU ReLU ReLU6 ReLUV2 SeLU Sigmoid
Softmax Softplus SoftShrink Softsign Tanh Adam AdamNoUpdateParam AdamWeightDecay
AdaptiveAvgPool2D ApplyAdadelta ApplyAdagrad ApplyAdagradDA ApplyAdagradV2 ApplyAdaMax
ApplyAddSign ApplyCenteredRMSProp ApplyFtrl ApplyGradientDescent ApplyMomentum ApplyPowerSign
ApplyProximalAdagrad ApplyProximalGradientDescent ApplyRMSProp FusedSparseAdam FusedSparseFtrl
FusedSparseLazyAdam FusedSparseProximalAdagrad LARSUpdate SparseApplyAdagrad
SparseApplyAdagradV2 SparseApplyProximalAdagrad SGD SparseApplyFtrl SparseApplyFtrlV2 Cdist
EditDistance LpNorm ComputeAccidentalHits LogUniformCandidateSampler UniformCandidateSampler
BoundingBoxDecode BoundingBoxEncode CheckValid CropAndResize ExtractVolumePatches IOU
L2Normalize NMSWithMask ROIAlign NoRepeatNGram Abs AccumulateNV2 ACos Acosh Add Addcdiv Addcmul
AddN Asin Asinh Atan Atan2 Atanh BesselI0e BesselI1e BitwiseAnd BitwiseOr BitwiseXor Ceil Conj
Cos Cosh Div DivNoNan Einsum Erf Erfc Erfinv Exp Expm1 Floor FloorDiv FloorMod Imag Inv Invert
Lerp Log Log1p LogicalAnd LogicalNot LogicalOr Mod Mul MulNoNan Neg Pow Real RealDiv Reciprocal
Rint Round Rsqrt Sign Sin Sinh Sqrt Square SquaredDifference SquareSumAll Sub Tan Trunc
TruncateDiv TruncateMod Xdivy Xlogy Argmax ArgMaxWithValue Argmin ArgMinWithValue ReduceAll
ReduceAny ReduceMax ReduceMean ReduceMin ReduceProd ReduceSum ApproximateEqual CheckBprop Equal
EqualCount Greater GreaterEqual InTopK IsFinite IsInf IsInstance IsNan IsSubClass Less
LessEqual Maximum Minimum NotEqual SameTypeShape TopK BatchMatMul BiasAdd Ger MatMul
MatrixInverse Eps Eye Fill LinSpace OneHot Ones OnesLike Zeros ZerosLike Gamma Multinomial
Poisson RandomCategorical RandomChoiceWithMask Randperm StandardLaplace StandardNormal
UniformInt UniformReal BatchToSpace BatchToSpaceND BroadcastTo Cast Concat CumProd CumSum
DataFormatDimMap DepthToSpace DType DynamicShape ExpandDims FloatStatus Gather GatherD GatherNd
HistogramFixedWidth Identity IndexAdd InplaceAdd InplaceSub InplaceUpdate InvertPermutation
MaskedFill MaskedSelect Meshgrid ParallelConcat PopulationCount Range Rank Reshape
ReverseSequence ReverseV2 ScatterNd Select Shape Size Slice Sort SpaceToBatch SpaceToBatchND
SpaceToDepth SparseGatherV2 Split SplitV Squeeze Stack StridedSlice TensorScatterAdd
TensorScatterDiv TensorScatterMax TensorScatterMin TensorScatterMul TensorScatterSub
TensorScatterUpdate TensorShape Tile Transpose Unique UniqueWithPad UnsortedSegmentMax
UnsortedSegmentMin UnsortedSegmentProd UnsortedSegmentSum Unstack ScalarCast ScalarToArray
ScalarToTensor TupleToArray Assign AssignAdd AssignSub ScatterAdd ScatterDiv ScatterMax
ScatterMin ScatterMul ScatterNdAdd ScatterNdSub ScatterNdUpdate ScatterNonAliasingAdd
ScatterSub ScatterUpdate GetNext AllGather AllReduce AlltoAll Broadcast NeighborExchange
NeighborExchangeV2 ReduceOp ReduceScatter HistogramSummary ImageSummary ScalarSummary
TensorSummary Print NPUAllocFloatStatus NPUClearFloatStatus NPUGetFloatStatus
SparseTensorDenseMatmul SparseToDense Depend GradOperation HookBackward HyperMap
InsertGradientOf Map MultitypeFuncGraph Partial AiCPURegOp CustomRegOp DataType TBERegOp
get_vm_impl_fn Custom
"""),
    "mindspore.dataset": ("zenith.dataset", """
Caltech101Dataset Caltech256Dataset CelebADataset Cifar10Dataset Cifar100Dataset
CityscapesDataset CocoDataset DIV2KDataset EMnistDataset FakeImageDataset FashionMnistDataset
FlickrDataset Flowers102Dataset Food101Dataset ImageFolderDataset KITTIDataset KMnistDataset
LFWDataset LSUNDataset ManifestDataset MnistDataset OmniglotDataset PhotoTourDataset
Places365Dataset QMnistDataset RenderedSST2Dataset SBDataset SBUDataset SemeionDataset
STL10Dataset SUN397Dataset SVHNDataset USPSDataset VOCDataset WIDERFaceDataset AGNewsDataset
AmazonReviewDataset CLUEDataset CoNLL2000Dataset DBpediaDataset EnWik9Dataset IMDBDataset
IWSLT2016Dataset IWSLT2017Dataset Multi30kDataset PennTreebankDataset SogouNewsDataset
SQuADDataset SST2Dataset TextFileDataset UDPOSDataset WikiTextDataset YahooAnswersDataset
YelpReviewDataset CMUArcticDataset GTZANDataset LibriTTSDataset LJSpeechDataset
SpeechCommandsDataset TedliumDataset YesNoDataset CSVDataset MindDataset OBSMindDataset
TFRecordDataset GeneratorDataset NumpySlicesDataset PaddedDataset RandomDataset
DistributedSampler PKSampler RandomSampler SequentialSampler SubsetRandomSampler SubsetSampler
WeightedRandomSampler BatchInfo DatasetCache DSCallback Schema Shuffle WaitedDSCallback compare
deserialize serialize show sync_wait_for_dataset config text transforms vision
"""),
    "mindspore.amp": ("zenith.amp", """
LossScaler DynamicLossScaler StaticLossScaler LossScaleManager DynamicLossScaleManager
FixedLossScaleManager auto_mixed_precision build_train_network init_status all_finite
"""),
    "mindspore.train": ("zenith.train", """
Model BackupAndRestore Callback CheckpointConfig EarlyStopping FlopsUtilizationCollector History
LambdaCallback LearningRateScheduler LossMonitor ModelCheckpoint OnRequestExit ReduceLROnPlateau
RunContext TimeMonitor Accuracy BleuScore ConfusionMatrix ConfusionMatrixMetric CosineSimilarity
Dice F1 Fbeta HausdorffDistance Loss MAE MeanSurfaceDistance Metric MSE OcclusionSensitivity
Perplexity Precision Recall ROC RootMeanSquareDistance Top1CategoricalAccuracy
Top5CategoricalAccuracy TopKCategoricalAccuracy auc get_metric_fn names rearrange_inputs
ConvertModelUtils ConvertNetUtils
"""),
}


def _present(module, name):
    try:
        getattr(module, name)
        return True
    except (AttributeError, NotImplementedError):
        return False


def coverage():
    """{list: (present names, absent names, not-CPU names)}."""
    out = {}
    for title, (module_name, names) in LISTS.items():
        module = importlib.import_module(module_name)
        present, absent, skipped = [], [], []
        for name in dict.fromkeys(names.split()):
            if name in NOT_CPU:
                skipped.append(name)
            elif _present(module, name):
                present.append(name)
            else:
                absent.append(name)
        out[title] = (present, absent, skipped)
    return out


def table():
    """The markdown coverage table and the lists of absent names."""
    rows = ["| MindSpore list | source | names | not for a CPU | present | absent | "
            "present of CPU names |", "|---|---|---:|---:|---:|---:|---:|"]
    details = []
    for title, (present, absent, skipped) in coverage().items():
        cpu = len(present) + len(absent)
        rows.append(f"| {title} | {SOURCES[title]} | {cpu + len(skipped)} | {len(skipped)} | "
                    f"{len(present)} | {len(absent)} | {100 * len(present) / cpu:.0f}% |")
        details.append(f"- **{title}** absent ({len(absent)}): " +
                       (", ".join(f"`{n}`" for n in absent) or "none"))
    return "\n".join(rows) + "\n\n" + "\n".join(details) + "\n"


if __name__ == "__main__":
    print(table(), end="")
