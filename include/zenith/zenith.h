// The umbrella include of the zenith framework.
#pragma once

#include "zenith/autograd.h"
#include "zenith/communication.h"
#include "zenith/context.h"
#include "zenith/data.h"
#include "zenith/ddp.h"
#include "zenith/dtype.h"
#include "zenith/error.h"
#include "zenith/io.h"
#include "zenith/models.h"
#include "zenith/nn.h"
#include "zenith/ops.h"
#include "zenith/optim.h"
#include "zenith/random.h"
#include "zenith/tensor.h"
#include "zenith/train.h"
