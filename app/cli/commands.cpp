// The table of the `phasor` commands (app/cli/command.h): a new command is a
// file of app/cli/ and two lines here: its factory's declaration and its place
// in the list, which is the order of `phasor --help`.
#include "app/cli/command.h"

namespace phasor::cli {

std::unique_ptr<Command> train_command();
std::unique_ptr<Command> eval_command();
std::unique_ptr<Command> generate_command();
std::unique_ptr<Command> plot_command();
std::unique_ptr<Command> grad_command();
std::unique_ptr<Command> curvature_command();
std::unique_ptr<Command> attention_command();
std::unique_ptr<Command> info_command();
std::unique_ptr<Command> sweep_command();

std::vector<std::unique_ptr<Command>> make_commands() {
  std::vector<std::unique_ptr<Command>> commands;
  for (auto make : {train_command, eval_command, generate_command, plot_command, grad_command, curvature_command,
                    attention_command, info_command, sweep_command})
    commands.push_back(make());
  return commands;
}

}  // namespace phasor::cli
