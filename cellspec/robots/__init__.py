"""The pybullet digital twin: robot models, IK, collision checks and motion planning.

Core modules (imported explicitly, so ``import cellspec.robots`` stays cheap):
``models`` (RobotSpec, robot_spec, MODELS), ``urdf`` (generated ABB arms, grippers),
``twin`` (Twin: one persistent DIRECT pybullet client per cell, kinematic only),
``ik`` (solve_ik, grasp_quat), ``collision`` (CollisionChecker, Contact) and
``motion`` (plan_motion: RRT-Connect over one or several arms). See docs/twin.md.
"""
