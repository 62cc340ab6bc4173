// swa-harness mask: the ATB mask tensor, exactly as the doc's generator writes it, to HDF5.
#include <iostream>

#include "commands.hpp"
#include "options.hpp"
#include "swa/atb_masks.hpp"
#include "swa/harness/base/h5.hpp"

namespace swa::cli {

int cmd_mask(const std::vector<std::string>& args) {
  std::string type_text, dtype_text, generator_text, out;
  std::int64_t window = 0, max_seq = 0, head_size = 128;
  po::options_description desc("swa-harness mask: write an ATB mask tensor to /mask (float32) of an HDF5 file");
  desc.add_options()
      ("type", po::value(&type_text)->required(), "swa-norm|swa-compress|causal|norm-compress")
      ("window", po::value(&window), "window W (keys including self); needed by swa-norm and swa-compress")
      ("max-seq", po::value(&max_seq), "N, the [N,N] size of swa-norm and causal masks")
      ("head-size", po::value(&head_size)->default_value(128), "D; sets swa-compress's block size and effective window")
      ("dtype", po::value(&dtype_text)->default_value("fp16"), "fp16|bf16: masked value -65536 (-inf once cast) or 1")
      ("generator", po::value(&generator_text)->default_value("python"), "python|cpp: which of the doc's samples")
      ("out", po::value(&out)->required(), "output FILE.h5 (written to a temporary, then renamed)");
  po::variables_map vm;
  if (!parse_options("mask", args, desc, vm)) return kOk;

  MaskSpec spec;
  spec.type = require_choice("--type", type_text, parse_mask_type(type_text), "swa-norm|swa-compress|causal|norm-compress");
  spec.dtype = require_choice("--dtype", dtype_text, parse_dtype(dtype_text), "fp16|bf16");
  if (spec.dtype == DType::fp32) throw UsageError("option --dtype: ATB masks are fp16|bf16, got fp32");
  spec.generator = require_choice("--generator", generator_text, parse_sample(generator_text), "python|cpp");
  const bool needs_window = spec.type == MaskType::swa_norm || spec.type == MaskType::swa_compress;
  const bool needs_seq = spec.type == MaskType::swa_norm || spec.type == MaskType::causal;
  if (needs_window && !vm.count("window")) throw UsageError("option --window is required for --type " + type_text);
  if (needs_seq && !vm.count("max-seq")) throw UsageError("option --max-seq is required for --type " + type_text);
  spec.window = needs_window ? require_range("--window", window, 1, std::int64_t{1} << 31) : 1;
  spec.max_seq = needs_seq ? require_range("--max-seq", max_seq, 1, 32768) : 1;
  spec.head_size = static_cast<int>(require_range("--head-size", head_size, 1, 1024));

  const Mask mask = generate_mask(spec);
  h5::AtomicFile file(out);
  h5::write_dataset(file.id(), "mask", mask.values,
                    {static_cast<hsize_t>(mask.rows), static_cast<hsize_t>(mask.cols)});
  h5::Handle set(H5Dopen2(file.id(), "mask", H5P_DEFAULT), H5Dclose, "open /mask");
  h5::write_attr(set.id(), "type", std::string(mask_type_name(spec.type)));
  h5::write_attr(set.id(), "window", needs_window ? spec.window : std::int64_t{0});
  h5::write_attr(set.id(), "head_size", static_cast<std::int64_t>(spec.head_size));
  h5::write_attr(set.id(), "dtype", std::string(dtype_name(spec.dtype)));
  h5::write_attr(set.id(), "generator", std::string(sample_name(spec.generator)));
  h5::write_attr(set.id(), "effective_window", mask.effective_window);
  h5::write_attr(set.id(), "block_size", mask.block);
  h5::write_attr(set.id(), "fill_value", static_cast<double>(mask.fill));
  h5::write_attr(set.id(), "fill_value_cast", static_cast<double>(round_to(spec.dtype, mask.fill)));
  h5::write_attr(set.id(), "visible_when", std::string("value == 0"));
  set.close();
  file.commit();
  std::cout << "wrote " << out << ": /mask " << mask.rows << "x" << mask.cols << " " << mask_type_name(spec.type)
            << " (" << dtype_name(spec.dtype) << ", generator " << sample_name(spec.generator);
  if (spec.type == MaskType::swa_compress)
    std::cout << ", block " << mask.block << ", effective window " << mask.effective_window;
  std::cout << ")\n";
  return kOk;
}

}  // namespace swa::cli
